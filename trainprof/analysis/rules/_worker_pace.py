"""Whether DataLoader workers keep pace with the loop, and the fixes that say how many it needs."""

from __future__ import annotations

import math

from trainprof.analysis.metrics import LoaderView, Metrics
from trainprof.analysis.rules._common import ms
from trainprof.analysis.worker_load import WorkerLoad
from trainprof.units import plural

WAITING_CPU = 0.5
# ...unless it waits for a CPU: runnable, not running (a worker among too many on few CPUs).
WAITING_RUNQ = 0.25
# The most workers suggested to overlap waits: past it, threads inside the workers lead.
MAX_WAITING_WORKERS = 16


def workers_wait(m: Metrics) -> bool:
    """The workers wait rather than compute: little CPU, and not for want of one (the kernel's
    run-queue wait; where it is unknown, the job left half its CPUs unused)."""
    load = m.worker_load
    if load is None or load.cpu >= WAITING_CPU:
        return False
    if load.runq is not None:
        return load.runq < WAITING_RUNQ
    cpus, used = m.usable_cpus, m.cpu_percent_mean
    return cpus is not None and used is not None and used < 50.0 * cpus


def waiting_clause(load: WorkerLoad, sample_method: str) -> str:
    """What workers busy making batches did with the CPU: little, so they wait."""
    runq = f", and waited {load.runq:.0%} of the time for one" if load.runq is not None else ""
    return (
        f"using {load.cpu:.0%} of a CPU each{runq}: {sample_method} waits (storage, the "
        "network, a lock or a sleep) rather than computes"
    )


def waiting_fix(m: Metrics, workers: int, loader: LoaderView | None) -> list[str]:
    """Overlap the waits: waiting workers take no CPU, so more of them than CPUs help; threads
    inside each worker overlap a batch's reads without more processes. With the loader's
    measured batch time (``run``), how many workers would keep pace; without (``attach``),
    raise them until the loop stops waiting."""
    cpus = f" {m.usable_cpus}" if m.usable_cpus else ""
    why = "these workers wait, and more of them overlap their waits without competing for CPU"
    caveat = (
        "each worker is a process, with its own memory; torch's warning past the CPU count is "
        "about workers that compute"
    )
    pace = workers_to_keep_pace(m, loader)
    if pace is None:
        more = f"more workers, beyond the{cpus} CPUs, until the loop stops waiting"
        workers_line, threads_first = f"{more}: {why} ({caveat})", False
    else:
        needed, compute_s = pace
        n = min(max(needed, workers + 1), max(MAX_WAITING_WORKERS, workers + 1))
        keeps = (
            f"{n} can feed the loop's {ms(compute_s)} of work a step"
            if n >= needed
            else f"about {needed} would keep pace with the loop's {ms(compute_s)} of work a step"
        )
        workers_line = f"num_workers={n}, beyond the{cpus} CPUs: {why}; {keeps} ({caveat})"
        threads_first = n < needed
    if loader is not None and loader.iterable:
        threads = (
            "overlap the reads inside each worker: fill a bounded queue.Queue from a few "
            "threads in __iter__ and yield from it"
        )
    else:
        threads = (
            "overlap a batch's reads inside each worker: give the dataset "
            "__getitems__(self, indices), which the DataLoader calls with a whole batch's "
            "indices, and read them with a thread pool (concurrent.futures.ThreadPoolExecutor): "
            "no more processes"
        )
    fix = [threads, workers_line] if threads_first else [workers_line, threads]
    fix.append(
        "if the data comes over the network, copy it to local disk (or memory) once and read "
        "it from there"
    )
    return fix


def workers_to_keep_pace(m: Metrics, loader: LoaderView | None) -> tuple[int, float] | None:
    """Workers enough to feed the loop at its pace without waiting, with a quarter spare, and
    that pace: the step's own work (without its data wait; the training steps' where
    evaluations ran). None without a steady state or the workers' batch time."""
    pace = training_step(m)
    if pace is None or m.steady is None or loader is None or loader.worker_fetch_ms is None:
        return None
    step_s, wait = pace
    compute_s = max(step_s * (1.0 - wait), 1e-4)
    per_step = max(m.steady.fetches_per_step, 1.0)
    needed = math.ceil(SATURATED * per_step / compute_s * loader.worker_fetch_ms / 1e3)
    return max(needed, 1), compute_s


# Tensors already in memory, fetched one sample at a time and stacked again by the collate.
TENSOR_DATASET_FIX = (
    "the dataset is tensors in memory (TensorDataset), gathered one sample at a time and "
    "stacked again: index a whole batch at once, DataLoader(dataset, batch_size=None, "
    "sampler=BatchSampler(RandomSampler(dataset), batch_size, drop_last=False)) (a "
    "TensorDataset takes a list of indices), or slice the tensors in the loop"
)


def is_tensor_dataset(loader: LoaderView | None) -> bool:
    """The loader's dataset is torch's TensorDataset: tensors in memory, fetched by sample."""
    return loader is not None and str(loader.config.get("dataset") or "").endswith(".TensorDataset")


def part_fix(part: str | None, loader: LoaderView | None) -> list[str]:
    """The fix for the dataset part that costs most (collate or __getitem__); ``attach`` gives
    the same one, without a loader's configuration."""
    if is_tensor_dataset(loader):
        return [TENSOR_DATASET_FIX]
    if part == "collate":
        name = ((loader.config.get("collate_fn") if loader else None) or "collate_fn").rsplit(".")[
            -1
        ]
        return [
            f"the collate ({name}) is the cost: pre-tokenize or pre-process once (offline, or "
            "cached in the dataset), use a batched fast tokenizer, and keep collate to padding "
            "and stacking",
            "with workers, collate runs in them in parallel; without, it runs in the loop",
        ]
    if loader is not None and loader.iterable:
        return [
            "make __iter__ cheaper per sample: decode in bulk (a shard or a block at a time), "
            "move augmentation to the GPU, store data in a faster format"
        ]
    return [
        "make __getitem__ cheaper: decode/resize once and cache (bounded), "
        "move augmentation to the GPU, store data in a faster format"
    ]


# Workers that could deliver at most this many times what the loop takes are at capacity
# (busy at least 80 % of the time): a single worker at 15.4 batches/s for a loop taking 15.1/s
# was called transfer-bound, as the main process waited inside receiving its batches; another
# worker doubled the rate, and the sharing strategy changed nothing.
SATURATED = 1.25


def workers_saturated(m: Metrics, loader: LoaderView | None, workers: int) -> bool:
    """The workers could not make the batches much faster than the loop takes them."""
    demand = loop_demand(m)
    if demand is None or loader is None or loader.worker_fetch_ms is None or not workers:
        return False
    return workers * 1e3 / loader.worker_fetch_ms < SATURATED * demand


def loop_demand(m: Metrics) -> float | None:
    """Batches a second the loop takes while it trains."""
    pace = training_step(m)
    if pace is None or m.steady is None:
        return None
    return max(m.steady.fetches_per_step, 1) / pace[0] if pace[0] > 0 else math.nan


def training_step(m: Metrics) -> tuple[float, float] | None:
    """The mean training step (seconds) and its data-wait share: where evaluations ran, of the
    steps outside them (a Lightning job took 55 batches/s between evaluations, 12/s over the
    run); else of the steady state."""
    s = m.steady
    if s is None:
        return None
    train_s, wait = m.activity.train_step_s, m.activity.steps_wait_outside_evals
    if wait is not None and train_s:
        return train_s, wait
    return s.duration_s / s.count, s.data_wait_frac or 0.0


def worker_line(
    m: Metrics, loader: LoaderView | None, workers: int, blame_cpus: bool = True
) -> tuple[str, str | None] | None:
    """What the workers could deliver against what the loop asks for. When they could keep up
    but the loop still waits, the CPUs are the limit (unless ``blame_cpus`` is off: receiving
    the batches is): say so instead of contradicting the wait."""
    demand = loop_demand(m)
    if demand is None or loader is None or loader.worker_fetch_ms is None or not workers:
        return None
    capacity = workers * 1e3 / loader.worker_fetch_ms
    line = (
        f"each worker needs {loader.worker_fetch_ms:.1f} ms per batch: "
        f"{plural(workers, 'worker')} {'delivers' if workers == 1 else 'deliver'} at most "
        f"{capacity:.1f} batches/s; the loop asks for {demand:.1f}/s"
    )
    cpus = m.usable_cpus
    if (
        workers_saturated(m, loader, workers)
        or cpus is None
        or cpus > workers + 1
        or not blame_cpus
    ):
        return line, None
    cpu = f" (the job used {m.cpu_percent_mean:.0f}% CPU)" if m.cpu_percent_mean else ""
    line = (
        f"each worker needs {loader.worker_fetch_ms:.1f} ms per batch, so {plural(workers, 'worker')} could "
        f"deliver {capacity:.1f} batches/s, more than the {demand:.1f}/s the loop asks for; they "
        f"fall behind because they and the main process share {cpus} usable CPUs{cpu}"
    )
    fix = (
        f"the workers and the training step compete for {cpus} CPUs: run on more cores, or "
        "leave the workers room (torch.set_num_threads(...) in the main process, fewer but "
        "cheaper workers, less per-sample work)"
    )
    return line, fix
