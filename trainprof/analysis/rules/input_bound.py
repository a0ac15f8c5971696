"""Input-bound: the training loop waits for its DataLoader.

Data loading (``__getitem__``, the ``collate_fn``, pinning) runs in the training loop itself
with ``num_workers=0``, or in workers too few or too slow to keep up. The finding names the
part that costs (``__getitem__`` or the collate) and the user function behind it. An
``IterableDataset`` makes its samples in ``__iter__``, which is named instead, and the fix
that adds workers says to split its stream per worker: each worker runs the whole
``__iter__``, so an unsplit stream is trained on ``num_workers`` times.

Where workers are the limit, what they do with the CPU decides the fix: workers that compute
want a cheaper dataset or more CPUs; workers busy at a few percent of a CPU wait (a remote
store's round trip, a lock) and want more of them than CPUs, or threads inside them.

Workers pay only where what they take off the loop (making a batch) is worth more than what
they add to it: the main process receiving every batch, rebuilding its tensors one by one or
unpickling a batch that is not tensors. Where workers run both are measured, and workers that
cost more than they save are told ``num_workers=0``; without workers the hand-over is not
measured, and a batch the loop makes in under ``handover`` is told a larger batch first.

Anti-pattern::

    loader = DataLoader(ImageFolder(root, transform=heavy_augment), batch_size=64)
    loader = DataLoader(texts, batch_size=64, collate_fn=tokenize_and_pad)  # in the loop

Best practice::

    loader = DataLoader(dataset, batch_size=64, num_workers=4, persistent_workers=True,
                        pin_memory=True)
    # and make the costly part cheaper: decode once and cache; pre-tokenize offline
"""

from __future__ import annotations

import math
import re

from trainprof.analysis import frameworks
from trainprof.analysis.attribution import data_part
from trainprof.analysis.costly_calls import HotLine, hottest_line
from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import LoaderView, Metrics
from trainprof.analysis.rules import _handover
from trainprof.analysis.rules._common import (
    GPU_BUSY,
    host_time_is_free,
    loader_caller,
    loader_code,
    ms,
    primary_loader,
    suggested_workers,
)
from trainprof.analysis.rules.registry import FROM_STACKS, Threshold, rule
from trainprof.analysis.rules.worker_startup import PERSISTENT_FIX
from trainprof.analysis.rules.worker_startup import SHARE as RESTARTS
from trainprof.analysis.worker_load import WorkerLoad
from trainprof.units import plural

WAIT_FRAC = Threshold(
    "wait_frac",
    0.20,
    "share",
    "share of steady time waiting for data beyond the sampler (TensorFlow's profiler calls "
    ">= 20 % highly input-bound)",
)
DATA = ("fetch", "collate", "pin", "transfer", "data_wait")


@rule(
    id="input-bound",
    title="Input-bound",
    family="input",
    costs="host",
    needs=("steps", "loader"),
    or_from=FROM_STACKS,
    claims=DATA,
    thresholds=(WAIT_FRAC, GPU_BUSY, _handover.HANDOVER),
    settings=frameworks.settings("workers", "persistent_workers", "pin_memory", "batch_size"),
)
def check(m: Metrics) -> Finding | None:
    if m.basis.by_stacks:
        return _from_stacks(m)
    s, led = m.steady, m.ledger
    assert s is not None and led is not None
    if host_time_is_free(m):
        return None
    share = led.share(*DATA)
    # Where evaluations take most of the run, the training steps' own wait is judged too: a
    # Lightning job whose steps waited 86 % of their time had 19 % of its run in data (its
    # evaluations took 75 %), and was not called input-bound.
    steps_only = m.activity.steps_wait_outside_evals
    if max(share, steps_only or 0.0) < WAIT_FRAC.value:
        return None
    loader = primary_loader(m)
    cfg = loader.config if loader else {}
    workers = cfg.get("num_workers") or 0
    batches = max(1.0, s.count * s.fetches_per_step)
    evidence = [
        f"the loop waits for data {share:.0%} of the steady time "
        f"({ms(led.get(*DATA) / s.count)} per step, {ms(led.get(*DATA) / batches)} per batch)"
        + (
            f"; the training steps outside evaluations wait {steps_only:.0%} of their time"
            if steps_only is not None and steps_only > share
            else ""
        ),
        f"num_workers={workers} on {m.usable_cpus or '?'} usable CPUs, "
        f"pin_memory={cfg.get('pin_memory')}, persistent_workers={cfg.get('persistent_workers')}, "
        f"prefetch_factor={cfg.get('prefetch_factor')}",
    ]
    part, part_line = _costly_part(loader)
    if part_line:
        evidence.append(part_line)
    # Receiving batches is most of the wait: the main process is the limit, not the workers;
    # unless the workers are at capacity, and the main process receives while they work. Where
    # receiving a batch costs more than a worker takes to make it, the workers do not pay.
    saturated = _saturated(m, loader, workers)
    receiving = led.get("transfer") >= 0.5 * led.get(*DATA)
    handover = _handover.measured(m, loader, batches)
    costs_more = handover is not None and handover.costs_more
    transfer = (receiving and not saturated) or costs_more
    contention = _worker_line(m, loader, workers, blame_cpus=not transfer)
    if contention:
        evidence.append(contention[0])
    if receiving and saturated and not costs_more:
        evidence.append(
            f"the main process waits inside receiving the batches ({led.share('transfer'):.0%} "
            "of the steady time, rebuild_storage_* in its stacks), but the workers are the "
            "limit: they are busy making the next batches meanwhile"
        )
    waiting = m.worker_load if saturated and workers_wait(m) else None
    if waiting is not None and loader is not None:
        evidence.append(
            "the workers were making batches nearly all the time, "
            + waiting_clause(waiting, loader.sample_method)
        )
    fix: list[str] = []
    cheap = _handover.cheap_batches(loader) if not workers else None
    if transfer:
        assert handover is not None
        evidence.insert(1, _handover.evidence(m, handover))
        fix.extend(_handover.fix(cfg, handover))
    elif waiting is not None:
        fix.extend(waiting_fix(m, workers, loader))
    elif cheap is not None:  # workers would save less than receiving a batch may cost
        fix.extend(_handover.per_batch_fix(m, cheap, batches))
        fix[1:1] = part_fix(part, loader)
    else:
        fix.append(contention[1] if contention and contention[1] else workers_fix(m, workers, cfg))
        if loader is not None and loader.iterable:
            fix.append(SHARD_FIX)
        fix.extend(part_fix(part, loader))
        hot = _hot_in(m, part) if not workers else None
        if hot is not None and hot.text:
            evidence.append(hot.evidence)
            rebuilt = _REBUILT.match(hot.text)
            if hot.call is not None:
                fix.insert(0, hot.call.fix)
            elif rebuilt:  # state the dataset builds again for every sample
                fix.insert(0, f"build {rebuilt.group(1)} once, in __init__, not for every sample")
    if m.gpu_util_mean is not None and not cfg.get("pin_memory"):
        # Not to a loader already pinned (the H200 input-bound job was told to pin it).
        fix.append("pin_memory=True and .to(device, non_blocking=True) for host→device copies")
    title = f"Input-bound: the training loop waits for data {share:.0%} of the time"
    if steps_only is not None and steps_only > share:
        title = (
            f"Input-bound: training steps wait for data {steps_only:.0%} of their time "
            "(outside evaluations)"
        )
    return Finding(
        id="input-bound",
        severity="warning",
        title=title,
        evidence=tuple(evidence),
        fix=tuple(fix),
        where=(loader.user_code_at(part) if loader and part else None) or loader_caller(m),
    )


# With workers, each one runs its own copy of an IterableDataset's __iter__: unsharded, every
# worker yields the whole stream, and the job trains on each sample num_workers times.
SHARD_FIX = (
    "an IterableDataset runs whole in every worker: split its stream per worker in __iter__ "
    "(torch.utils.data.get_worker_info(): id and num_workers, e.g. every num_workers-th shard "
    "from the id-th), or each worker yields every sample"
)


def _costly_part(loader: LoaderView | None) -> tuple[str | None, str | None]:
    """Which part of preparing a batch costs most (getitem | collate), and the line saying so."""
    if loader is None:
        return None, None
    main = loader.main_fetch_ms is not None
    total = loader.main_fetch_ms if main else loader.worker_fetch_ms
    collate = loader.main_collate_ms if main else loader.worker_collate_ms
    if total is None:
        return None, None
    collate = min(collate or 0.0, total)
    getitem = total - collate
    place = "in the main process" if main else "in each worker"
    name = (loader.config.get("collate_fn") or "collate_fn").rsplit(".", 1)[-1]
    line = (
        f"{place}, a batch takes {_ms(total)}: {loader.sample_method} {_ms(getitem)}, "
        f"{name} {_ms(collate)}"
    )
    if main and loader.main_pin_ms:
        line += f", pin_memory {_ms(loader.main_pin_ms)}"
    return ("collate" if collate > getitem else "getitem"), line


def _ms(value_ms: float) -> str:
    return f"{value_ms:.2f} ms" if value_ms < 1 else f"{value_ms:.1f} ms"


def workers_fix(m: Metrics, workers: int, cfg: dict[str, object] | None = None) -> str:
    """Load batches in parallel with the step: start workers, or add some (with the settings
    that go with them, those the loader's ``cfg`` does not have yet; all without one)."""
    if workers == 0:
        return (
            f"DataLoader(..., num_workers={suggested_workers(m)}, persistent_workers=True) "
            "so batches are prepared in parallel with the training step"
        )
    cfg = cfg or {}
    also = [
        setting
        for setting, done in (
            ("persistent_workers=True", cfg.get("persistent_workers") is True),
            ("prefetch_factor=4", _number(cfg.get("prefetch_factor")) >= 4),
        )
        if not done
    ]
    return "more workers if CPUs are free (num_workers up to usable CPUs - 1)" + "".join(
        f", {setting}" for setting in also
    )


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


# A worker making batches nearly all the time at under this share of a CPU waits for most of
# it on something else (the slow-store job's workers: 3 %).
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
    pace = _workers_to_keep_pace(m, loader)
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


def _workers_to_keep_pace(m: Metrics, loader: LoaderView | None) -> tuple[int, float] | None:
    """Workers enough to feed the loop at its pace without waiting, with a quarter spare, and
    that pace: the step's own work (without its data wait; the training steps' where
    evaluations ran). None without a steady state or the workers' batch time."""
    pace = _training_step(m)
    if pace is None or m.steady is None or loader is None or loader.worker_fetch_ms is None:
        return None
    step_s, wait = pace
    compute_s = max(step_s * (1.0 - wait), 1e-4)
    per_step = max(m.steady.fetches_per_step, 1.0)
    needed = math.ceil(SATURATED * per_step / compute_s * loader.worker_fetch_ms / 1e3)
    return max(needed, 1), compute_s


def part_fix(part: str | None, loader: LoaderView | None) -> list[str]:
    """The fix for the dataset part that costs most (collate or __getitem__); ``attach`` gives
    the same one, without a loader's configuration."""
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


def _saturated(m: Metrics, loader: LoaderView | None, workers: int) -> bool:
    """The workers could not make the batches much faster than the loop takes them."""
    demand = _demand(m)
    if demand is None or loader is None or loader.worker_fetch_ms is None or not workers:
        return False
    return workers * 1e3 / loader.worker_fetch_ms < SATURATED * demand


def _demand(m: Metrics) -> float | None:
    """Batches a second the loop takes while it trains."""
    pace = _training_step(m)
    if pace is None or m.steady is None:
        return None
    return max(m.steady.fetches_per_step, 1) / pace[0] if pace[0] > 0 else math.nan


def _training_step(m: Metrics) -> tuple[float, float] | None:
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


def _worker_line(
    m: Metrics, loader: LoaderView | None, workers: int, blame_cpus: bool = True
) -> tuple[str, str | None] | None:
    """What the workers could deliver against what the loop asks for. When they could keep up
    but the loop still waits, the CPUs are the limit (unless ``blame_cpus`` is off: receiving
    the batches is): say so instead of contradicting the wait."""
    demand = _demand(m)
    if demand is None or loader is None or loader.worker_fetch_ms is None or not workers:
        return None
    capacity = workers * 1e3 / loader.worker_fetch_ms
    line = (
        f"each worker needs {loader.worker_fetch_ms:.1f} ms per batch: "
        f"{plural(workers, 'worker')} {'delivers' if workers == 1 else 'deliver'} at most "
        f"{capacity:.1f} batches/s; the loop asks for {demand:.1f}/s"
    )
    cpus = m.usable_cpus
    if _saturated(m, loader, workers) or cpus is None or cpus > workers + 1 or not blame_cpus:
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


def _from_stacks(m: Metrics) -> Finding | None:
    """The same judgement from stack samples alone: the main thread's share inside the
    DataLoader, and the workers' stacks where they were sampled."""
    a, led = m.outside, m.ledger
    assert a is not None and led is not None
    # beyond the sampler, as from timed steps: sampler-overhead judges the sampler's own time
    share = led.share(*DATA)
    if share < WAIT_FRAC.value or host_time_is_free(m):
        return None
    parts = [
        (led.share("fetch"), "dataset __getitem__"),
        (led.share("collate"), "collate_fn"),
        (led.share("pin"), "pin_memory"),
        (led.share("transfer"), "receiving batches from workers"),
        (led.share("data_wait"), "waiting on workers or the loader's own code"),
    ]
    split = ", ".join(f"{name} {s:.0%}" for s, name in parts if s >= 0.01)
    restarts = _restarts_cost(m)
    evidence = [
        f"the main thread was inside the DataLoader {share:.0%} of the time ({m.basis.sampled})",
        f"of it: {split}" if split else "",
        _workers_seen(m, restarts),
    ]
    part = "collate" if led.share("collate") > led.share("fetch") else "getitem"
    # More workers cannot share the main thread's receiving; unless the workers are at
    # capacity, and the main thread receives while they make the next batches.
    busy = _workers_busy(m)
    saturated = busy is not None and busy * SATURATED >= 1.0
    receiving = led.get("transfer") >= 0.5 * led.get(*DATA)
    waiting = m.worker_load if saturated and workers_wait(m) else None
    if busy is not None and (receiving or saturated):  # the hand-over's or the workers'
        limit = ": they are the limit" if saturated else ""
        if saturated and receiving:
            limit += ", and the main thread's wait inside receiving is a wait for them"
        if waiting is not None:
            limit += "; " + waiting_clause(waiting, "__getitem__")
        evidence.append(
            f"the workers' main threads were making batches {busy:.0%} of the time{limit}"
        )
    transfer = receiving and not saturated
    if waiting is not None:
        fix = waiting_fix(m, a.workers_at_once or a.workers, None)
    elif transfer:
        by_fd = any(f[0] == "rebuild_storage_fd" for s in m.activity.spans for f in s.frames)
        seen = _handover.HandOver(0.0, None, _handover.unpickled(m))  # its cost per batch: unread
        fix = _handover.fix({"sharing_strategy": "file_descriptor"} if by_fd else {}, seen)
    else:
        at_once = a.workers_at_once if a.workers_at_once is not None else a.workers
        fix = [workers_fix(m, at_once), *part_fix(part, None)]
    if restarts >= RESTARTS.value:
        fix = [PERSISTENT_FIX, *fix]
    return Finding(
        id="input-bound",
        severity="warning",
        title=f"Input-bound: the training loop waits for data {share:.0%} of the time",
        evidence=tuple(e for e in evidence if e),
        fix=tuple(fix),
        where=loader_caller(m) if transfer else loader_code(m, part) or loader_caller(m),
    )


def _workers_busy(m: Metrics) -> float | None:
    """The share of the DataLoader workers' main-thread time spent making batches (inside the
    fetcher: the dataset and the collate), not waiting for the next index; None where their
    stacks cover less than a second."""
    spans = m.outside.worker_spans if m.outside is not None else ()
    total = sum(s.t1 - s.t0 for s in spans)
    if total < 1.0:
        return None
    busy = sum(
        s.t1 - s.t0
        for s in spans
        if any(f[1].replace("\\", "/").endswith("utils/data/_utils/fetch.py") for f in s.frames)
    )
    return busy / total


def _restarts_cost(m: Metrics) -> float:
    """The main thread's share of the sampled time spent starting DataLoader workers again
    (in the multi-process iterator's ``__init__``: forking them, sending each the dataset);
    0 where they were not restarted."""
    a = m.outside
    if a is None or not a.workers_restarted or not a.sampled_s:
        return 0.0
    starting = sum(
        s.t1 - s.t0
        for s in m.activity.spans
        if any(f[0] == "_MultiProcessingDataLoaderIter.__init__" for f in s.frames)
    )
    return starting / a.sampled_s


def _workers_seen(m: Metrics, restarts: float) -> str:
    """How many workers were seen; where restarting them cost the main thread (``restarts``,
    its share), how many at once and what that cost."""
    a = m.outside
    assert a is not None
    cpus = f" on {m.usable_cpus} usable CPUs" if m.usable_cpus else ""
    seen = f"{plural(a.workers, 'DataLoader worker process')} seen under the job"
    if restarts < 0.01:  # none, or a restart too rare to count (a new loader)
        return seen + cpus
    return (
        f"{seen} in {a.sampled_s:.1f} s, at most {a.workers_at_once} at once{cpus}: workers "
        "are started again and again (a new DataLoader iterator each epoch starts its workers "
        f"unless persistent_workers=True); starting them held the main thread {restarts:.0%} "
        "of the time, and their first batches are waited for"
    )


# A line of __getitem__ that sets an attribute of the dataset: ``self.vocab = build(...)``.
_REBUILT = re.compile(r"^(self\.\w+)\s*=[^=]")


def _hot_in(m: Metrics, part: str | None) -> HotLine | None:
    """The line that held the main process longest inside the loader's costly part (the
    dataset's ``__getitem__``, or the collate): its text and the call it makes."""
    bucket = {"getitem": "fetch", "collate": "collate"}.get(part or "")
    if bucket is None:
        return None
    return hottest_line(m.activity.spans, m.activity.source, lambda f: data_part(f) == bucket)
