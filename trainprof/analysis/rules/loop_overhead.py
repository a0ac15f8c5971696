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

from collections import Counter

from trainprof.analysis import work_kind
from trainprof.analysis.attribution import categoriser, where
from trainprof.analysis.cadence import PERIODIC, cadence
from trainprof.analysis.costly_calls import hot_line
from trainprof.analysis.findings import Finding
from trainprof.analysis.ledger import STALLS
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._common import GPU_BUSY, host_time_is_free, loop_time
from trainprof.analysis.rules.registry import FROM_STACKS, Threshold, rule
from trainprof.store.stacks import Frame

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
    "gc.collect, json.dump...) or waits every step (a child process, a socket, a lock, a "
    "sleep): what it costs and its fix are known",
)
NAMES = {"fetch": "__getitem__", "data_wait": "data wait", "stall_compute": "stalls"}


@rule(
    id="loop-overhead",
    examples=("loop_overhead", "subprocess_per_step", "numpy_in_forward"),
    title="Loop overhead",
    family="host",
    costs="host",
    needs=("steps", "stacks"),
    or_from=FROM_STACKS,
    claims=("loop", "idle"),
    thresholds=(SHARE, KNOWN, MIN_SAMPLES, GPU_BUSY),
)
def check(m: Metrics) -> Finding | None:
    prof, led = m.activity.loop_profile, m.ledger
    if prof is None or led is None:
        return None
    if host_time_is_free(m):
        return None
    # the loop's own time: its wait for a CPU (another process's load) is cpu-starved's, and
    # would shrink every share of the loop's work alike
    loop = loop_time(m) - led.get("cpu_wait")
    # The loop's host work and its waits, line by line: a line that waits every step (on a
    # child process, a socket, a lock, a sleep) costs its wait too, off the CPU.
    lines = prof.lines.get("other", Counter()) + prof.lines.get("idle", Counter())
    frame = lines.most_common(1)[0][0] if lines else None
    kind = work_kind.dominant(m.activity.spans, m.activity.source, frame) if frame else None
    waits = kind in work_kind.WAITS
    buckets = ("loop", "idle") if waits else ("loop",)
    share = led.get(*buckets) / loop if loop > 0 else 0.0
    hot = hot_line(frame, m.activity.source, m.activity.spans)
    at_line = lines[frame] / 1e6 / prof.total if frame and prof.total > 0 else 0.0
    known = hot is not None and (hot.call is not None or waits) and at_line >= KNOWN.value
    if share < SHARE.value and not known:
        return None
    if m.basis.by_stacks and frame is not None and _periodic(m, frame):
        return None  # bursts every few steps: a stall's (cpu-stall), not every step's
    rate = m.stack_rate_hz
    sampled = prof.seconds.get("other", 0.0) + (prof.seconds.get("idle", 0.0) if waits else 0.0)
    if rate and sampled * rate < MIN_SAMPLES.value:
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
            fix = (
                f"make {hot.quoted} cheaper",
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


def _periodic(m: Metrics, frame: Frame) -> bool:
    """From stacks alone, the hot line runs in bursts with several steps between them."""
    category_of = categoriser(dict(m.activity.source))

    def progress(frames: tuple[Frame, ...]) -> bool:
        return category_of(frames) in ("backward", "optimizer")

    return cadence(m.activity.spans, frame, progress) == PERIODIC


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
