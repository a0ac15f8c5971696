"""Every torchrun rank measured on its own steady state, and the job seen across ranks. Pure.

Each rank's event file gives its steps (throughput, step time, data wait, batch size), its
``torch.save`` calls, the exception that ended it, and the probe's collective counters
(``probe/collectives.py``): seconds waiting in Python collectives and in DDP's gradient
all-reduce, cumulative, with a timestamp, so the seconds inside the rank's steady window are
read off the counters around it. The host sampler gives each rank's CPU and memory.

In synchronous data parallelism every rank runs at the slowest rank's pace: the others wait
for it in the collectives. So the slowest rank is the one that waits *least* there, and what
the others lose per step is their collective wait beyond its own (its own is the transfer
itself). ``spread`` reads that off the ranks; ``straggler-rank`` turns it into a finding.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from trainprof.analysis.attribution import Profile, profile
from trainprof.analysis.stats import int_percentiles, mean_between, tail
from trainprof.store import gpus
from trainprof.store.events import ProcessLog
from trainprof.store.session import ProcSeries, Samples, Session

# Backends whose collectives run on the device's streams: the host does not block in them.
DEVICE_BACKENDS = frozenset({"nccl", "xccl", "hccl"})


@dataclass(frozen=True)
class RankView:
    """One rank's steady state. ``None``: not measured (never 0)."""

    rank: int
    pid: int
    steps: int
    p50_s: float
    wait_per_step_s: float  # data wait (DataLoader.__next__) per steady step
    steady_steps: int = 0
    step_s: float = 0.0  # mean steady step time (its steady span over its steady steps)
    steps_per_s: float | None = None
    collective_per_step_s: float | None = None  # waiting in collectives, per steady step
    ddp_per_step_s: float | None = None  # the part of it at the end of DDP's backward()
    # backward passes per steady step once a DDP model exists, and those in which it
    # all-reduced the gradients (outside no_sync())
    backwards_per_step: float | None = None
    syncs_per_step: float | None = None
    samples_per_step: float | None = None
    save_s: float = 0.0  # torch.save seconds inside the steady window
    cpu_percent: float | None = None  # the rank process, mean over its steady window
    peak_rss_bytes: int | None = None
    gpu_util: float | None = None  # its GPU's (store/gpus.py), mean %
    local_rank: int | None = None
    node: int | None = None  # the node's position in `trainprof report A B ...` (merged runs)
    primary: bool = False  # the rank whose steps and ledger describe the job (rank 0)
    sampled: bool = False  # its Python stacks were sampled inside its steady window
    # Its main thread's time by activity in its steady window, from its own stacks (the
    # primary's at the full rate, every other rank's at a lower one); None: not sampled.
    profile: Profile | None = field(default=None, compare=False)
    exception: tuple[str, str] | None = None  # (type, message) that ended the rank
    backend: str | None = None  # its process group's backend, as the probe saw it
    window: tuple[float, float] | None = None  # its steady window, monotonic seconds

    @property
    def busy_s(self) -> float | None:
        """Its own work per step: the step less the time it waited in collectives."""
        if self.collective_per_step_s is None:
            return None
        return max(0.0, self.step_s - self.collective_per_step_s)


@dataclass(frozen=True)
class Spread:
    """How the ranks differ: the slowest rank, and what the others lose waiting for it."""

    slow: RankView
    others: tuple[RankView, ...]
    lost_per_step_s: float  # the median other rank's collective wait beyond the slow rank's
    lost_share: float  # of a step (every rank runs at the slowest's pace)
    median_wait_s: float  # the others' median collective wait per step
    by: str  # "collectives" (measured waits) or "data" (data waits only: no collective counters)


def rank_views(
    session: Session, warmup: Callable[[int], int], min_steps: int
) -> tuple[RankView, ...]:
    """A view of every rank with at least ``min_steps`` steps, less its ``warmup(steps)``
    leading steps (the same warm-up rule as the job's)."""
    primary = session.primary
    sampled_pid = (session.meta.get("stacks") or {}).get("pid")
    views = []
    for p in session.processes:
        rank = p.header.get("rank")
        if p.role != "rank" or rank is None or p.n_steps < min_steps:
            continue
        node = p.header.get("node")
        samples = session.node_samples.get(node, session.samples) if node is not None else None
        samples = samples or session.samples
        view = _view(
            p,
            warmup(p.n_steps),
            samples.procs.get(p.pid),
            primary=p is primary,
        )
        own = session.spans if p is primary and sampled_pid == p.pid else None
        spans = own or session.rank_spans.get(view.rank)
        if spans and view.window is not None:
            prof = profile(spans, session.source, *view.window, _on_cuda(p))
            view = replace(view, profile=prof, sampled=prof.total > 0)
        index = _gpu_index(samples, p, view.local_rank)
        gpu = samples.gpu_by_index.get(index) if index is not None else None
        if gpu is not None and view.window is not None:
            view = replace(view, gpu_util=mean_between(gpu[0], gpu[1], *view.window))
        views.append(view)
    return tuple(sorted(views, key=lambda v: v.rank))


def _gpu_index(samples: Samples, p: ProcessLog, local_rank: int | None) -> int | None:
    """The NVML index of a rank's GPU: the one it trains on (UUID, NVML's process list); else
    torchrun's convention, GPU = local rank, where the machine's GPUs are all the job's (with
    ``CUDA_VISIBLE_DEVICES=4,5`` local rank 0 is NVML's GPU 4)."""
    index = gpus.gpu_of(samples, p)
    if index is not None:
        return index
    job = samples.job_gpus
    every = job is not None and len(job.indices) == len(samples.gpu_by_index)
    return local_rank if every else None


def _on_cuda(p: ProcessLog) -> bool:
    """The rank's model was on a CUDA device (its probe's precision record)."""
    return any(
        isinstance(i.get("precision"), dict) and i["precision"].get("device") == "cuda"
        for i in p.infos
    )


def _view(p: ProcessLog, warm: int, series: ProcSeries | None, primary: bool) -> RankView:
    t, dur = p.steps["t"], p.steps["dur"]
    n = len(t) - warm
    span_s = (t[-1] - t[warm - 1]) / 1e6 if warm else sum(dur) / 1e6
    lo, hi = p.t0 + (t[warm - 1] if warm else t[0] - dur[0]) / 1e6, p.t0 + t[-1] / 1e6
    p50 = int_percentiles(dur, (50,), start=warm, scale=1e6)[0]
    waits = sum(tail(p.steps["wait"], warm)) / 1e6
    samples = [s for s in tail(p.steps["samples"], warm) if s > 0]
    coll = _collectives(p, lo, hi)
    exc = next(
        (
            (str(i["exception"]), str(i.get("message") or ""))
            for i in reversed(p.infos)
            if i.get("exception")
        ),
        None,
    )
    save_s = sum(d / 1e6 for ts, d, _b, _p in p.saves if lo <= p.t0 + ts / 1e6 <= hi)
    return RankView(
        rank=int(p.header["rank"]),
        pid=p.pid,
        steps=p.n_steps,
        p50_s=p50,
        wait_per_step_s=waits / n if n else 0.0,
        steady_steps=n,
        step_s=span_s / n if n else 0.0,
        steps_per_s=n / span_s if span_s > 0 else None,
        collective_per_step_s=(coll[0] + coll[1]) / n if coll and n else None,
        ddp_per_step_s=coll[1] / n if coll and n else None,
        backwards_per_step=_per_step(_counted(p, "ddp_n", lo, hi), n),
        syncs_per_step=_per_step(_counted(p, "sync_n", lo, hi), n),
        samples_per_step=sum(samples) / len(samples) if samples else None,
        save_s=save_s,
        cpu_percent=_mean_in(series, lo, hi) if series else None,
        peak_rss_bytes=_peak(series.rss) if series else None,
        local_rank=p.header.get("local_rank"),
        node=p.header.get("node"),
        primary=primary,
        exception=exc,
        backend=backend_of(p),
        window=(lo, hi),
    )


def backend_of(p: ProcessLog) -> str | None:
    """The process group's backend, as the rank's probe last recorded it."""
    return next(
        (
            str(c["backend"])
            for i in reversed(p.infos)
            if isinstance(c := i.get("collectives"), dict) and c.get("backend")
        ),
        None,
    )


def _collectives(p: ProcessLog, lo: float, hi: float) -> tuple[float, float] | None:
    """(Python collectives, DDP wait) seconds inside [lo, hi] from the cumulative counters;
    None when the rank recorded none (collectives not measured, or none called)."""
    if any(c.get("backend") in DEVICE_BACKENDS for _t, c in _collective_records(p)):
        return None  # the host does not wait in them: no wait measured (never 0)
    points = _counters(p, "s", "ddp_s")
    if not points:
        return None
    ts = [t for t, _ in points]
    coll = [v[0] for _, v in points]
    ddp = [v[1] for _, v in points]
    # The probe writes its first record at the end of the first collective: the counters
    # were 0 when that collective began.
    ts.insert(0, ts[0] - coll[0] - ddp[0])
    coll.insert(0, 0.0)
    ddp.insert(0, 0.0)
    return (
        max(0.0, _at(ts, coll, hi) - _at(ts, coll, lo)),
        max(0.0, _at(ts, ddp, hi) - _at(ts, ddp, lo)),
    )


def _counted(p: ProcessLog, key: str, lo: float, hi: float) -> float | None:
    """How much the collectives record's cumulative count ``key`` rose inside [lo, hi]; None
    where the rank never recorded it (no DDP model, or a probe before it was counted)."""
    points = _counters(p, key)
    if not points:
        return None
    ts, values = [t for t, _ in points], [v[0] for _, v in points]
    return max(0.0, _at(ts, values, hi) - _at(ts, values, lo))


def _collective_records(p: ProcessLog) -> list[tuple[float, dict[str, Any]]]:
    """The rank's collectives records (the probe's cumulative counters), with their times."""
    return [
        (p.t0 + info["t"] / 1e6, c)
        for info in p.infos
        if isinstance(c := info.get("collectives"), dict) and isinstance(info.get("t"), int)
    ]


def _counters(p: ProcessLog, *keys: str) -> list[tuple[float, list[float]]]:
    """(time, the counters ``keys``) of each collectives record that has all of them."""
    return [
        (t, [float(c[k]) for k in keys])
        for t, c in _collective_records(p)
        if all(_num(c.get(k)) for k in keys)
    ]


def _per_step(count: float | None, steps: int) -> float | None:
    return count / steps if count is not None and steps else None


def _num(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _at(ts: Sequence[float], values: Sequence[float], t: float) -> float:
    """A cumulative counter at time t, linear between the records around it."""
    i = bisect.bisect_right(ts, t)
    if i == 0:
        return values[0]
    if i >= len(ts):
        return values[-1]
    t0, t1 = ts[i - 1], ts[i]
    f = (t - t0) / (t1 - t0) if t1 > t0 else 1.0
    return values[i - 1] + f * (values[i] - values[i - 1])


def _mean_in(series: ProcSeries, lo: float, hi: float) -> float | None:
    return mean_between(series.t, series.cpu, lo, hi)


def _peak(values: Sequence[float]) -> int | None:
    vals = [v for v in values if not math.isnan(v)]
    return int(max(vals)) if vals else None


def unmeasured_reason(ranks: Sequence[RankView]) -> str:
    """Why no rank has a collective wait (never read as 0)."""
    backends = {r.backend for r in ranks if r.backend in DEVICE_BACKENDS}
    if backends:
        return (
            f"{', '.join(sorted(b for b in backends if b))} runs them on the GPU's streams and "
            "the host does not wait in them"
        )
    return "the probe recorded no collective (none called, or not timed: FSDP2, compiled)"


def spread(ranks: Sequence[RankView]) -> Spread | None:
    """The slowest rank and what the others lose; None with fewer than two ranks.

    With collective counters on every rank: the slowest is the one that waits least in them.
    Without (an older run, a job with no collectives the probe sees): the one that waits
    longest for data, the only per-rank cause then measured."""
    if len(ranks) < 2:
        return None
    if all(r.collective_per_step_s is not None for r in ranks):
        slow = min(ranks, key=lambda r: (r.collective_per_step_s or 0.0, r.rank))
        others = tuple(r for r in ranks if r is not slow)
        typical = _median([r.collective_per_step_s or 0.0 for r in others])
        lost = max(0.0, typical - (slow.collective_per_step_s or 0.0))
        by = "collectives"
    else:
        slow = max(ranks, key=lambda r: (r.wait_per_step_s, -r.rank))
        others = tuple(r for r in ranks if r is not slow)
        typical = _median([r.wait_per_step_s for r in others])
        lost = max(0.0, slow.wait_per_step_s - typical)
        by = "data"
    step = slow.step_s if slow.step_s > 0 else slow.p50_s
    share = min(1.0, lost / step) if step > 0 else 0.0
    return Spread(slow, others, lost, share, typical, by)


def _median(values: Sequence[float]) -> float:
    """The middle value (the lower one of an even count: a median that is a real rank)."""
    s = sorted(values)
    return s[(len(s) - 1) // 2] if s else 0.0


def median_rank(ranks: Sequence[RankView], key: str = "step_s") -> RankView | None:
    """The rank in the middle by ``key`` (a real rank, not an average of two)."""
    if not ranks:
        return None
    s = sorted(ranks, key=lambda r: (getattr(r, key) or 0.0, r.rank))
    return s[(len(s) - 1) // 2]


# The per-rank numbers the report shows, by name: (attribute, unit).
FIELDS: tuple[tuple[str, str], ...] = (
    ("steps_per_s", "it/s"),
    ("step_s", "s"),
    ("wait_per_step_s", "s"),
    ("collective_per_step_s", "s"),
    ("busy_s", "s"),
    ("cpu_percent", "%"),
    ("peak_rss_bytes", "bytes"),
    ("gpu_util", "%"),
)


@dataclass(frozen=True)
class Range:
    """min / median / max of one number over the ranks that measured it, and who holds each."""

    lo: float
    median: float
    hi: float
    lo_rank: int
    hi_rank: int
    measured: int  # ranks with a value


def aggregate(ranks: Sequence[RankView]) -> dict[str, Range | None]:
    """Each of FIELDS over the ranks: O(ranks log ranks), whatever the world size."""
    out: dict[str, Range | None] = {}
    for name, _unit in FIELDS:
        vals = sorted((float(v), r.rank) for r in ranks if (v := getattr(r, name)) is not None)
        if not vals:
            out[name] = None
            continue
        out[name] = Range(
            vals[0][0],
            vals[(len(vals) - 1) // 2][0],
            vals[-1][0],
            vals[0][1],
            vals[-1][1],
            len(vals),
        )
    return out


def span_text(ranks: Sequence[int]) -> str:
    """``0–3, 7, 9–12``: ranks as runs, readable at any world size."""
    out: list[str] = []
    nums = sorted(set(ranks))
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        out.append(str(nums[i]) if i == j else f"{nums[i]}–{nums[j]}")
        i = j + 1
    return ", ".join(out)
