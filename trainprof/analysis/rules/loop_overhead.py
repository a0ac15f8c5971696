"""Loop overhead: host work in the training loop outside forward, backward and the optimizer.

Per-step metrics, gradient statistics per parameter, Python bookkeeping: on every step, in the
main thread. Time in stalls, saves and evaluations is not counted here (their own rules claim
it). On a GPU that is busy almost all the time, host work overlaps the GPU and costs nothing,
so the rule stays quiet there.

Anti-pattern::

    for p in model.parameters():
        stats[p] = (p.grad.norm().item(), p.grad.abs().max().item())

Best practice::

    if step % 100 == 0:
        norms = torch._foreach_norm([p.grad for p in model.parameters()])
"""

from __future__ import annotations

from trainprof.analysis import work_kind
from trainprof.analysis.attribution import where
from trainprof.analysis.findings import Finding
from trainprof.analysis.ledger import STALLS
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._common import GPU_BUSY, host_time_is_free
from trainprof.analysis.rules._per_step import hot_work, periodic
from trainprof.analysis.rules.registry import FROM_STACKS, Threshold, rule

SHARE = Threshold(
    "share", 0.25, "share", "share of the loop (outside stalls, saves, evals) in other host work"
)
MIN_SAMPLES = Threshold(
    "min_samples",
    10,
    "count",
    "and at least this many stack samples in it: a few are one moment the thread stood still "
    "(descheduled on a busy machine), not a habit of the loop",
)
KNOWN = Threshold(
    "known_call_share",
    0.10,
    "share",
    "or this share of the loop at one line that makes a known costly call (copy.deepcopy, "
    "gc.collect, json.dump...): what it costs and its fix are known",
)
NAMES = {"fetch": "__getitem__", "data_wait": "data wait", "stall_compute": "stalls"}


@rule(
    id="loop-overhead",
    examples=("loop_overhead", "numpy_in_forward"),
    title="Loop overhead",
    family="host",
    costs="host",
    needs=("steps", "stacks"),
    or_from=FROM_STACKS,
    claims=("loop",),
    thresholds=(SHARE, KNOWN, MIN_SAMPLES, GPU_BUSY),
)
def check(m: Metrics) -> Finding | None:
    w = hot_work(m)
    if w is None or host_time_is_free(m):
        return None
    led, loop, frame, kind, hot = w.led, w.loop_s, w.frame, w.kind, w.hot
    if w.waits:
        return None  # a wait every step: blocking-stall's
    buckets, share = w.buckets, w.share
    known = hot is not None and hot.call is not None and w.at_line >= KNOWN.value
    if share < SHARE.value and not known:
        return None
    if m.basis.by_stacks and frame is not None and periodic(m, frame):
        return None  # bursts every few steps: a stall's (cpu-stall), not every step's
    rate = m.stack_rate_hz
    if rate and w.sampled_s * rate < MIN_SAMPLES.value:
        return None
    parts = ", ".join(
        f"{NAMES.get(b, b)} {s / loop:.0%}"
        for b, s in sorted(led.seconds.items(), key=lambda kv: -kv[1])
        if s / loop >= 0.01 and b not in STALLS and b != "cpu_wait"
    )
    inside = work_kind.inside_model(m.activity.spans, frame) if frame is not None else None
    evidence = [
        f"the training loop's time (outside stalls, saves and evaluations): {parts}",
        f"'other host work' is the user's host work called from inside the model's {inside}"
        if inside
        else "'other host work' is code in the loop itself: per-step metrics, gradient norms, "
        "Python bookkeeping",
    ]
    if hot is not None:
        evidence.append(hot.evidence)
    if kind is not None and frame is not None:
        evidence.append(_kind_line(kind, inside))
    if hot is not None and hot.call is not None:
        title = f"{hot.call.call} in the training loop takes {share:.0%} of the loop"
        # the table's fix for what the line calls, then the step's cadence: not "per-step
        # extras", as the call may be the step's own work (a deepcopy of the batch)
        fix: tuple[str, ...] = (
            hot.call.fix,
            f"or, where {hot.quoted} need not run every step, run it every N steps",
        )
    else:
        title = f"Host work outside forward/backward/optimizer takes {share:.0%} of the loop"
        fix = (EVERY_N, FUSED)
        if hot is not None and hot.text:
            loop = work_kind.interpreting(hot.text)
            fix = (
                f"vectorise the Python loop around {hot.quoted}: torch operators on whole "
                "tensors, not Python numbers element by element"
                if loop
                else f"make {hot.quoted} cheaper",
                f"or, where {hot.quoted} need not run every step, run it every N steps",
                OFF,
            )
    if kind is not None and (hot is None or hot.call is None) and kind != work_kind.PYTHON:
        fix = (work_kind.FIX[kind], *fix[1:])
    if inside and (hot is None or hot.call is None):
        what = work_kind.DESCRIBE[kind or work_kind.PYTHON]
        title = f"Host work inside the model's {inside} ({what}) takes {share:.0%} of the loop"
    return Finding(
        id="loop-overhead",
        severity="warning",
        title=title,
        evidence=tuple(evidence),
        fix=fix,
        where=where(frame),
        wants=tuple((b, 1.0) for b in buckets),
    )


def _kind_line(kind: str, inside: str | None) -> str:
    """What the hot line's stacks do, and where it runs from: the loop, or inside the model's
    forward or backward (a hook, a custom autograd.Function)."""
    at = (
        f"called from inside the model's {inside} (a hook, a custom autograd.Function)"
        if inside
        else "in the loop"
    )
    return f"what the line does: {work_kind.DESCRIBE[kind]}, every step, {at}"


EVERY_N = "do per-step extras every N steps (metrics, grad norms, histograms)"
FUSED = (
    "use the fused built-ins: torch.nn.utils.clip_grad_norm_ / torch._foreach_norm instead of "
    "a Python loop over parameters"
)
OFF = "or move it off the training loop's thread (a background thread or process)"
