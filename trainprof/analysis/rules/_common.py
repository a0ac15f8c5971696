"""Helpers several rules share: units, the training loader, and where the loop calls the code
a finding is about."""

from __future__ import annotations

from collections import Counter

from trainprof.analysis import attribution, ledger
from trainprof.analysis.attribution import caller_of, where
from trainprof.analysis.call_sites import CallSite, call_site
from trainprof.analysis.metrics import LoaderView, Metrics
from trainprof.analysis.rules.registry import Threshold
from trainprof.analysis.source_lines import def_line
from trainprof.analysis.stalls import Segment, period

STEP_BUCKETS = ledger.STEP
GPU_BUSY = Threshold(
    "gpu_idle",
    0.10,
    "share",
    "on a GPU job, quiet when the GPU is idle less than this share of a step (device timeline, "
    "else NVML): host time while it is busy costs nothing",
)


def host_time_is_free(m: Metrics) -> bool:
    """The GPU is busy almost all the time: host work overlaps it and costs nothing."""
    idle = m.device_idle
    return idle is not None and idle < GPU_BUSY.value


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds < 10 else f"{seconds:.1f} s"


def primary_loader(m: Metrics) -> LoaderView | None:
    """The loader that feeds training: the first one created (eval loaders come later)."""
    return m.loaders[0] if m.loaders else None


def suggested_workers(m: Metrics) -> int:
    cpus = m.usable_cpus or 2
    return max(1, min(8, cpus - 1))


def loader_caller(m: Metrics) -> str | None:
    """The user's line that pulls batches from the DataLoader (next(it), for batch in loader)."""
    spans = m.activity.spans
    # The line the probe read at the loader's first batch: the loop calls it from the same
    # line all run long, and py-spy's --nonblocking samples, torn now and then, once named a
    # line of training_step as the caller. Without it, the stacks say.
    frame = m.activity.loader_caller
    if frame is None and m.activity.window:
        frame = caller_of(spans, m.activity.window, "torch/utils/data/")
    if frame is None and spans:
        frame = caller_of(spans, (spans[0].t0, spans[-1].t1), "torch/utils/data/")
    return where(frame)


def site(m: Metrics, windows: list[tuple[float, float]]) -> CallSite | None:
    """Where the training loop calls the code that ran inside the windows, and its hot line."""
    if not m.activity.spans or not windows:
        return None
    return call_site(m.activity.spans, windows, m.activity.loop_funcs, m.activity.step_lines)


def window_s(m: Metrics) -> float | None:
    w = m.activity.window
    return (w[1] - w[0]) if w else None


def loop_time(m: Metrics) -> float:
    """The steady time outside stalls, saves and evaluations: the training loop itself."""
    led = m.ledger
    if led is None:
        return 0.0
    return led.window_s - led.get(*ledger.STALLS)


def interval(m: Metrics, segments: list[Segment]) -> str:
    """'every N steps' from the stalled steps the segments fall in, else seconds between them.
    An attach whose step rate was not estimated has its stalls numbered in order only (no step
    numbers): counting them would read "every 1 steps"."""
    counted = m.outside is None or m.outside.rate.steps_per_s is not None
    stalls = m.activity.stalls if counted else ()
    idx = sorted(st.index for st in stalls if any(s.t0 < st.t1 and s.t1 > st.t0 for s in segments))
    p = period(idx) if idx else None
    if p:
        return f"every {p} steps"
    if len(segments) >= 2:
        gaps = [b.t0 - a.t1 for a, b in zip(segments, segments[1:], strict=False)]
        return f"every {sum(gaps) / len(gaps):.1f} s"
    return "once"


def loader_code(m: Metrics, part: str) -> str | None:
    """``file:line (Class.__getitem__)`` of the dataset's __getitem__ (or the collate_fn), as
    the probe names it: the line of its ``def``, found from the stacks' hot line."""
    workers = m.outside.worker_spans if m.outside is not None else ()
    spans = list(m.activity.spans) + list(workers)
    counter: Counter[tuple[str, str, int]] = Counter()
    for s in spans:
        for f in reversed(s.frames):
            name = attribution.short_name(f[0])
            hit = (
                name in ("__getitem__", "__getitems__") if part == "getitem" else "collate" in name
            )
            if hit and attribution.is_user_file(f[1]):
                counter[f] += int((s.t1 - s.t0) * 1e6)
                break
    if not counter:
        return None
    qualname, path, line = counter.most_common(1)[0][0]
    return f"{path}:{def_line(path, line, attribution.short_name(qualname))} ({qualname})"
