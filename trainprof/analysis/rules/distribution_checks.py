"""Distribution checks: torch.distributions validates its arguments on every call, a share of the step.

By default a ``Distribution`` checks its parameters each time one is built, and each value
given to ``log_prob``, against its constraints (a simplex, positive values). A loop that builds
one per step, as a policy's action selection does, pays those checks every time: the work is
the model's own, but the checks change nothing a correct program computes. A note, not a
warning: the checks catch a bad parameter early, and turning them off is a choice.

Anti-pattern::

    for t in range(steps):
        probs = policy(state)
        action = Categorical(probs).sample()   # probs checked on every call

Best practice::

    action = Categorical(probs, validate_args=False).sample()
    # or once at start-up: torch.distributions.Distribution.set_default_validate_args(False)
"""

from __future__ import annotations

from collections import Counter

from trainprof.analysis.attribution import is_user_file, where
from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._advice import checks_share, in_window, validate_args_fix, validating
from trainprof.analysis.rules.registry import Threshold, rule

SHARE = Threshold(
    "share", 0.05, "share", "share of the steady time inside torch.distributions' checks"
)


@rule(
    id="distribution-checks",
    title="Distribution argument checks",
    family="model",
    severity="info",
    needs=("steps", "stacks"),
    costs="host",
    thresholds=(SHARE,),
)
def check(m: Metrics) -> Finding | None:
    share = checks_share(m)
    if share < SHARE.value:
        return None
    return Finding(
        id="distribution-checks",
        severity="info",
        title=f"torch.distributions checks its arguments on every call: {share:.0%} of the time",
        evidence=(
            f"{share:.0%} of the steady time is inside torch.distributions' checks of its "
            "parameters and samples (its constraints' check(), _validate_sample)",
        ),
        fix=(validate_args_fix(share),),
        where=_caller(m),
    )


def _caller(m: Metrics) -> str | None:
    """The user's line that builds or queries the distribution, where the checks run longest."""
    seconds: Counter[tuple[str, str, int]] = Counter()
    for s, frames in in_window(m):
        if not validating(frames):
            continue
        user = [f for f in frames if is_user_file(f[1])]
        if user:
            seconds[user[-1]] += int(s * 1e6)
    return where(seconds.most_common(1)[0][0]) if seconds else None
