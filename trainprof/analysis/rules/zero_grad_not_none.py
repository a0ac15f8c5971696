"""zero_grad keeps the gradients: ``zero_grad(set_to_none=False)`` writes zeros into every
gradient tensor each step instead of dropping them.

Anti-pattern::

    optimizer.zero_grad(set_to_none=False)

Best practice::

    optimizer.zero_grad()        # set_to_none=True, the default since torch 2.0
"""

from __future__ import annotations

from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._structure import worth_tuning
from trainprof.analysis.rules.registry import rule


@rule(
    id="zero-grad-not-none",
    title="zero_grad keeps the gradients",
    family="gpu",
    severity="info",
    needs=("steps", "cuda"),
)
def check(m: Metrics) -> Finding | None:
    if not m.activity.zero_grad_kept or not worth_tuning(m):
        return None
    return Finding(
        id="zero-grad-not-none",
        severity="info",
        title="zero_grad(set_to_none=False) zeroes every gradient tensor each step",
        evidence=("the job called optimizer.zero_grad(set_to_none=False)",),
        fix=("optimizer.zero_grad() (set_to_none=True): no memset kernel per gradient",),
    )
