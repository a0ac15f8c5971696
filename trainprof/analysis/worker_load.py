"""How DataLoader workers used the CPU, from the host sampler (psutil and the kernel's
schedstat): a worker busy making batches that uses a small share of a CPU, and does not wait
for one, is waiting on something else (storage, the network, a lock, a sleep). More workers
than CPUs then help; for a worker that computes they would only compete.

Measured on a job whose ``__getitem__`` read from a slow store (a 4 ms wait a sample): its two
workers made batches all the time at 3 % of a CPU each, and the input-bound finding had told
it to make ``__getitem__`` cheaper by caching decodes and to keep ``num_workers`` under the
machine's two CPUs."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from trainprof.store.events import ProcessLog
from trainprof.store.session import Samples

# A worker making batches at least this share of its life is a training loader's at work; an
# evaluation loader's persistent workers, idle between evaluations, would read as waiting.
BUSY = 0.5


@dataclass(frozen=True)
class WorkerLoad:
    """The workers' mean use of one CPU each, and the share of time they waited runnable for
    one, over a window."""

    workers: int  # worker processes with CPU samples in the window
    cpu: float  # mean share of one CPU a worker used (1.0: a core, more with threads)
    runq: float | None  # mean share of time a worker's main thread waited for a CPU

    def to_json(self) -> dict[str, object]:
        return {
            "workers": self.workers,
            "cpu": round(self.cpu, 4),
            "runq": None if self.runq is None else round(self.runq, 4),
        }


def busy_workers(workers: Iterable[ProcessLog], samples: Samples) -> list[int]:
    """The pids of the workers that spent at least ``BUSY`` of their life making batches, by
    their own fetch counters: from the host sampler's first sight of them (a forked worker's
    clock starts at its parent's launch) to their last record."""
    pids = []
    for w in workers:
        seen = samples.procs.get(w.pid)
        start = seen.t[0] if seen is not None and len(seen.t) else w.t0
        life = w.t0 + w.fetch_t_us / 1e6 - start
        if life > 0 and w.fetch_us / 1e6 >= BUSY * life:
            pids.append(w.pid)
    return pids


def worker_load(
    samples: Samples, pids: Iterable[int], window: tuple[float, float] | None
) -> WorkerLoad | None:
    """The workers ``pids`` over ``window``; over the whole run without one, or where the
    window holds no reading (a steady window shorter than the sampler's tick); None where no
    worker has a CPU reading."""
    pids = set(pids)
    load = _load(samples, pids, window)
    return load if load is not None or window is None else _load(samples, pids, None)


def _load(
    samples: Samples, pids: set[int], window: tuple[float, float] | None
) -> WorkerLoad | None:
    cpus: list[float] = []
    waits: list[float] = []
    seen = 0
    for pid in pids:
        series = samples.procs.get(pid)
        if series is None:
            continue
        inside = [
            i for i, t in enumerate(series.t) if window is None or window[0] <= t <= window[1]
        ]
        own = [series.cpu[i] / 100.0 for i in inside if not math.isnan(series.cpu[i])]
        if not own:
            continue
        seen += 1
        cpus.extend(own)
        wait = runq_share([(series.t[i], series.rq_wait[i]) for i in inside])
        if wait is not None:
            waits.append(wait)
    if not seen:
        return None
    return WorkerLoad(
        workers=seen,
        cpu=sum(cpus) / len(cpus),
        runq=sum(waits) / len(waits) if waits else None,
    )


def runq_share(readings: list[tuple[float, float]]) -> float | None:
    """Runnable-wait seconds over elapsed seconds between the first and last (time, cumulative
    wait) readings."""
    points = [(t, w) for t, w in readings if not math.isnan(w)]
    if len(points) < 2 or points[-1][0] <= points[0][0]:
        return None
    return max(0.0, (points[-1][1] - points[0][1]) / (points[-1][0] - points[0][0]))
