"""Rules about steps that stall: CPU work, checkpoint saves, evaluation (seeds 000 and 002)."""

from __future__ import annotations

from trainprof.analysis.attribution import dominant_user_frame, function_share, where
from trainprof.analysis.checks_loader import ms
from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.stalls import Segment, period

# cpu-stall: at least this many CPU stalls, costing at least this share of the steady window.
CPU_STALL_MIN_COUNT = 3
CPU_STALL_SHARE = 0.05
# Without a period, stalls count only when one user function holds the main thread for most
# of the stall time and rarely otherwise (so a noisy machine's slow steps are not "stalls").
CPU_STALL_OWN_SHARE = 0.5
CPU_STALL_ELSEWHERE_MAX = 0.2
# checkpoint-stall / eval-stall: share of the run (first step to last) spent saving / evaluating.
CHECKPOINT_SHARE = 0.03
EVAL_SHARE = 0.05


def _span(m: Metrics) -> float | None:
    w = m.activity.window
    return (w[1] - w[0]) if w else None


def _interval_in_steps(m: Metrics, segments: list[Segment]) -> str:
    """'every N steps' from the step counts between consecutive segments (never empty)."""
    idx = sorted(
        st.index for st in m.activity.stalls if any(s.t0 < st.t1 and s.t1 > st.t0 for s in segments)
    )
    p = period(idx) if idx else None
    if p:
        return f"every {p} steps"
    if len(segments) >= 2:
        gaps = [b.t0 - a.t1 for a, b in zip(segments, segments[1:], strict=False)]
        return f"every {sum(gaps) / len(gaps):.1f} s"
    return "once"


def check_cpu_stall(m: Metrics) -> Finding | None:
    stalls = [s for s in m.activity.stalls if s.cause == "cpu"]
    span = _span(m)
    if len(stalls) < CPU_STALL_MIN_COUNT or not span:
        return None
    cost = sum(s.excess_s for s in stalls)
    share = cost / span
    if share < CPU_STALL_SHARE:
        return None
    assert m.steady is not None
    p = period([s.index for s in stalls])
    p = p if p is not None and p >= 2 else None
    windows = [(s.t0, s.t1) for s in stalls]
    frame = dominant_user_frame(m.activity.spans, windows)
    if p is None and not _distinct_code(m, windows, frame):
        return None
    length = cost / len(stalls)
    evidence = [
        f"{len(stalls)} steps took {ms(length + m.steady.p50_s)} on average instead of "
        f"{ms(m.steady.p50_s)}" + (f", every {p} steps" if p else " (irregular)"),
        f"the stalls cost {cost:.2f} s, {share:.0%} of the steady run; during them the main "
        "process was not waiting for data, saving or evaluating",
    ]
    if frame is not None:
        evidence.append(
            f"the main thread was in {frame[0]}() at {frame[1]}:{frame[2]} during the stalls"
        )
    elif m.activity.stacks_error or not m.activity.spans:
        evidence.append("no stack samples to name the code (py-spy unavailable)")
    name = f"{frame[0]}()" if frame else "the CPU-bound work"
    return Finding(
        id="cpu-stall",
        severity="warning",
        title=f"Training stalls {'every ' + str(p) + ' steps' if p else 'repeatedly'} on CPU work in the main process",
        evidence=tuple(evidence),
        fix=(
            f"move {name} off the training loop: run it in a background process "
            "(concurrent.futures.ProcessPoolExecutor) and pick up the result later",
            "or precompute it before training, or vectorise it (torch/numpy instead of Python loops)",
        ),
        impact=min(1.0, share),
        where=where(frame),
    )


def _distinct_code(m: Metrics, stall_windows: list[tuple[float, float]], frame: object) -> bool:
    if not isinstance(frame, tuple) or m.activity.window is None:
        return False
    func = (frame[0], frame[1])
    inside = function_share(m.activity.spans, stall_windows, func)
    w0, w1 = m.activity.window
    gaps, last = [], w0
    for a, b in sorted(stall_windows):
        if a > last:
            gaps.append((last, a))
        last = max(last, b)
    if w1 > last:
        gaps.append((last, w1))
    elsewhere = function_share(m.activity.spans, gaps, func)
    return inside >= CPU_STALL_OWN_SHARE and elsewhere <= CPU_STALL_ELSEWHERE_MAX


def check_checkpoint_stall(m: Metrics) -> Finding | None:
    saves = m.activity.saves
    span = _span(m)
    if not saves or not span:
        return None
    w0, w1 = m.activity.window or (0.0, 0.0)
    inside = [(seg, b, path) for seg, b, path in saves if seg.t1 > w0 and seg.t0 < w1]
    if not inside:
        return None
    cost = sum(seg.duration for seg, _b, _p in inside)
    share = cost / span
    if share < CHECKPOINT_SHARE:
        return None
    sizes = [b for _s, b, _p in inside if b >= 0]
    segs = [seg for seg, _b, _p in inside]
    frame = dominant_user_frame(m.activity.spans, [(s.t0, s.t1) for s in segs])
    size = f", {sizes[-1] / 2**20:.1f} MB each" if sizes else ""
    return Finding(
        id="checkpoint-stall",
        severity="warning",
        title=f"Checkpoint saves block training: {share:.0%} of the run in torch.save",
        evidence=(
            f"{len(inside)} torch.save calls, {ms(cost / len(inside))} each{size}, "
            f"{_interval_in_steps(m, segs)}",
            f"{cost:.2f} s in all, {share:.0%} of the steady run; training waits for each save",
            f"last saved to {inside[-1][2]}",
        ),
        fix=(
            "save less often (every N minutes, or only at the end of an epoch)",
            "skip optimizer state when you will not resume; keep only the last N checkpoints",
            "save asynchronously: torch.distributed.checkpoint.async_save, or copy the "
            "state_dict to CPU and write it from a background thread",
        ),
        impact=min(1.0, share),
        where=where(frame),
    )


def check_eval_stall(m: Metrics) -> Finding | None:
    evals = list(m.activity.evals)
    span = _span(m)
    if not evals or not span:
        return None
    w0, w1 = m.activity.window or (0.0, 0.0)
    inside = [e for e in evals if e.t1 > w0 and e.t0 < w1]
    cost = sum(e.duration for e in inside)
    share = cost / span
    if not inside or share < EVAL_SHARE:
        return None
    frame = dominant_user_frame(m.activity.spans, [(e.t0, e.t1) for e in inside])
    return Finding(
        id="eval-stall",
        severity="warning",
        title=f"Evaluation between steps takes {share:.0%} of the run",
        evidence=(
            f"{len(inside)} evaluations (model.eval() … model.train()), {ms(cost / len(inside))} each, "
            f"{_interval_in_steps(m, inside)}",
            f"{cost:.2f} s in all, {share:.0%} of the steady run",
        ),
        fix=(
            "evaluate less often, or on a fixed subset of the validation set",
            "use a larger eval batch size and torch.inference_mode() instead of torch.no_grad()",
            "give the validation DataLoader workers (num_workers, persistent_workers=True)",
        ),
        impact=min(1.0, share),
        where=where(frame),
    )
