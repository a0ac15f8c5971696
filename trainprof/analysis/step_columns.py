"""The columns the job's steps are counted in (optimizer steps, else batches or backward
passes), and the steady state's step statistics."""

from __future__ import annotations

import bisect
import dataclasses
import math
from array import array
from collections.abc import Sequence
from typing import Any

from trainprof.analysis.metrics import (
    StepStats,
)
from trainprof.analysis.stalls import (
    Segment,
)
from trainprof.analysis.stats import int_percentiles, scaled, tail
from trainprof.store.events import ProcessLog


def step_columns(primary: ProcessLog | None) -> tuple[str, dict[str, Any]]:
    if primary is None:
        return "step", {}
    if primary.n_steps:
        return "step", primary.steps
    b = primary.batches
    if not len(b["t"]):
        return backward_columns(primary.backwards)
    # A job without an optimizer: each batch is a step; its duration is the gap between batches.
    ts = b["t"]
    return "batch", {
        "t": ts,
        "dur": _gaps(ts),
        "wait": b["wait"],
        "sampler": b["sampler"],
        "batch_size": b["batch_size"],
        "fetches": [1] * len(ts),
        "samples": [max(x, 0) for x in b["batch_size"]],
    }


def backward_columns(ts: array[int]) -> tuple[str, dict[str, Any]]:
    """A hand-written loop (no torch.optim step, no DataLoader): each backward() is a step, its
    duration the gap between two returns; no data wait, no batch size measured."""
    if not len(ts):
        return "step", {}
    n = len(ts)
    return "backward pass", {
        "t": ts,
        "dur": _gaps(ts),
        "wait": [0] * n,
        "sampler": [0] * n,
        "batch_size": [-1] * n,
        "fetches": [0] * n,
        "samples": [0] * n,
    }


def _gaps(ts: Sequence[int]) -> list[int]:
    """Durations of events recorded only by their end: the first from the process's start."""
    return [ts[0]] + [ts[i] - ts[i - 1] for i in range(1, len(ts))]


def steady_stats(cols: dict[str, Any], warm: int) -> tuple[StepStats, array[float]]:
    """Steady-state statistics. Per-step values stay in typed arrays (8 bytes a step, not a
    32-byte float object plus a pointer), read in place (no slices), and the percentiles
    are selected from the integer columns (``int_percentiles``), not a sorted copy: a
    million-step run keeps this to the 8 MB of the durations it returns."""
    t = cols["t"]
    durs = scaled(cols["dur"], warm, 1e6)
    count = len(durs)
    total = math.fsum(durs)
    span = (t[-1] - t[warm - 1]) / 1e6 if warm else total
    waits = sum(tail(cols["wait"], warm))
    n_samples = sum(filter((0).__lt__, tail(cols["samples"], warm)))
    n_bs = sum(map((0).__lt__, tail(cols["batch_size"], warm)))  # batch sizes > 0
    p50, p95 = int_percentiles(cols["dur"], (50, 95), start=warm, scale=1e6)
    return (
        StepStats(
            count=count,
            duration_s=span,
            steps_per_s=count / span if span > 0 else math.nan,
            samples_per_s=n_samples / span if n_samples and span > 0 else None,
            p50_s=p50,
            p95_s=p95,
            max_s=max(durs),
            data_wait_frac=min(1.0, waits / 1e6 / total) if total > 0 else 0.0,
            sampler_frac=min(1.0, sum(tail(cols["sampler"], warm)) / 1e6 / total)
            if total > 0
            else 0.0,
            wait_per_step_s=waits / 1e6 / count,
            fetches_per_step=int_percentiles(cols["fetches"], (50,), start=warm)[0],
            batch_size=int(int_percentiles(cols["batch_size"], (50,), start=warm, low=1)[0])
            if n_bs
            else None,
            samples_per_step=n_samples / count if n_samples else None,
        ),
        durs,
    )


def without_eval_samples(
    steady: StepStats, cols: dict[str, Any], warm: int, evals: Sequence[Segment], t0: float
) -> StepStats:
    """A step that holds an evaluation counted the evaluation loader's batches as its samples
    (a Trainer's run read 2,445 samples/s for 872): such a step counts a typical step's."""
    samples, t, dur = cols["samples"], cols["t"], cols["dur"]
    typical = int_percentiles(samples, (50,), start=warm)[0] if len(samples) > warm else 0
    extra = 0
    for g in evals:
        lo = bisect.bisect_left(t, int((g.t0 - t0) * 1e6))  # the first step ending after it starts
        for i in range(max(lo, warm), len(t)):
            if t[i] - dur[i] >= (g.t1 - t0) * 1e6:
                break
            extra += max(0, samples[i] - typical)
    if not extra or not steady.samples_per_s or not steady.samples_per_step:
        return steady
    n = steady.samples_per_step * steady.count - extra
    return dataclasses.replace(
        steady,
        samples_per_s=n / steady.duration_s if steady.duration_s > 0 else None,
        samples_per_step=n / steady.count,
    )
