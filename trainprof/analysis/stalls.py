"""Slow steps, and what the main process was doing during them. Pure.

A step is a stall when it takes more than ``STALL_FACTOR`` × the median step and at least
``STALL_MIN_EXCESS_S`` more. Its cause is the first that fits: a ``torch.save`` overlapping it
(checkpoint), an evaluation segment overlapping it (eval: a top-level ``eval()`` … ``train()``
with no optimizer step in between), waiting for data for most of it (data), else CPU work in
the main process (cpu). Stalls found among the warm-up steps are ignored.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from trainprof.analysis.stats import median
from trainprof.store.events import ProcessLog

STALL_FACTOR = 3.0
STALL_MIN_EXCESS_S = 0.02


@dataclass(frozen=True)
class Stall:
    index: int  # step number (0-based)
    t0: float  # monotonic
    t1: float
    excess_s: float  # time beyond a median step
    cause: str  # "checkpoint" | "eval" | "data" | "cpu"


@dataclass(frozen=True)
class Segment:
    t0: float
    t1: float

    @property
    def duration(self) -> float:
        return self.t1 - self.t0


def eval_segments(log: ProcessLog) -> list[Segment]:
    """Spans from a top-level eval() to the next train() with no optimizer step inside."""
    t0 = log.t0
    steps = log.steps["t"]
    out: list[Segment] = []
    start: int | None = None
    for t, training in log.modes:
        if not training and start is None:
            start = t
        elif training and start is not None:
            if not _any_between(steps, start, t):
                out.append(Segment(t0 + start / 1e6, t0 + t / 1e6))
            start = None
    return out


def _any_between(sorted_ts: object, lo: int, hi: int) -> bool:
    import bisect

    i = bisect.bisect_right(sorted_ts, lo)  # type: ignore[call-overload]
    return i < len(sorted_ts) and sorted_ts[i] < hi  # type: ignore[arg-type, index]


def save_segments(log: ProcessLog) -> list[Segment]:
    return [Segment(log.t0 + (t - d) / 1e6, log.t0 + t / 1e6) for t, d, _b, _p in log.saves]


def find_stalls(
    log: ProcessLog, warmup: int, evals: list[Segment], saves: list[Segment]
) -> list[Stall]:
    ts, durs, waits = log.steps["t"], log.steps["dur"], log.steps["wait"]
    if len(ts) - warmup < 5:
        return []
    med = median([d / 1e6 for d in durs[warmup:]])
    out = []
    for i in range(warmup, len(ts)):
        d = durs[i] / 1e6
        if d < STALL_FACTOR * med or d - med < STALL_MIN_EXCESS_S:
            continue
        t1 = log.t0 + ts[i] / 1e6
        t0 = t1 - d
        if any(_overlaps(s, t0, t1) for s in saves):
            cause = "checkpoint"
        elif any(_overlaps(s, t0, t1) for s in evals):
            cause = "eval"
        elif waits[i] / 1e6 > 0.5 * d:
            cause = "data"
        else:
            cause = "cpu"
        out.append(Stall(i, t0, t1, d - med, cause))
    return out


def _overlaps(seg: Segment, t0: float, t1: float) -> bool:
    return seg.t0 < t1 and seg.t1 > t0


def period(indices: list[int]) -> int | None:
    """The step period of recurring events, if most gaps agree (±1 step); None if irregular."""
    if len(indices) < 3:
        return None
    gaps = [b - a for a, b in zip(indices, indices[1:], strict=False)]
    common, _n = Counter(gaps).most_common(1)[0]
    close = sum(1 for g in gaps if abs(g - common) <= 1)
    return common if close >= 0.7 * len(gaps) else None
