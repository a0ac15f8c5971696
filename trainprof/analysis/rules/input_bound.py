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
from trainprof.analysis.rules._worker_pace import (
    SATURATED,
    is_tensor_dataset,
    part_fix,
    waiting_clause,
    waiting_fix,
    worker_line,
    workers_saturated,
    workers_wait,
)
from trainprof.analysis.rules.registry import FROM_STACKS, Threshold, rule
from trainprof.analysis.rules.worker_startup import PERSISTENT_FIX
from trainprof.analysis.rules.worker_startup import SHARE as RESTARTS
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
    examples=(
        "input_bound",
        "worker_transfer",
        "slow_worker",
        "waiting_worker",
        "collate_tokenize",
        "gpu_input_bound",
        "worker_pickle",
        "heavy_augment",
        "light_augment",
    ),
    title="Input-bound",
    family="input",
    costs="host",
    needs=("steps", "loader"),
    or_from=FROM_STACKS,
    claims=(*DATA, "worker_start"),
    thresholds=(WAIT_FRAC, GPU_BUSY, _handover.HANDOVER, _handover.PICKLED),
    settings=frameworks.settings("workers", "persistent_workers", "pin_memory", "batch_size"),
)
def check(m: Metrics) -> Finding | None:
    if m.basis.by_stacks:
        return _from_stacks(m)
    s, led = m.steady, m.ledger
    assert s is not None and led is not None
    if host_time_is_free(m):
        return None
    loader = primary_loader(m)
    # Workers that persist do not restart: an epoch's first batches wait for them to make the
    # first batches afresh, which is this rule's wait, not worker-startup's
    refill = loader is not None and loader.workers_persist
    data = (*DATA, "worker_start") if refill else DATA
    share = led.share(*data)
    # Where evaluations take most of the run, the training steps' own wait is judged too: a
    # Lightning job whose steps waited 86 % of their time had 19 % of its run in data (its
    # evaluations took 75 %), and was not called input-bound.
    steps_only = m.activity.steps_wait_outside_evals
    if max(share, steps_only or 0.0) < WAIT_FRAC.value:
        return None
    cfg = loader.config if loader else {}
    workers = cfg.get("num_workers") or 0
    batches = max(1.0, s.count * s.fetches_per_step)
    evidence = [
        f"the loop waits for data {share:.0%} of the steady time "
        f"({ms(led.get(*data) / s.count)} per step, {ms(led.get(*data) / batches)} per batch)"
        + (
            f"; the training steps outside evaluations wait {steps_only:.0%} of their time"
            if steps_only is not None and steps_only > share
            else ""
        ),
        f"num_workers={workers} on {m.usable_cpus or '?'} usable CPUs, "
        f"pin_memory={cfg.get('pin_memory')}, persistent_workers={cfg.get('persistent_workers')}, "
        f"prefetch_factor={cfg.get('prefetch_factor')}",
    ]
    if refill and loader is not None and led.get("worker_start") > 0:
        evidence.append(
            f"{led.share('worker_start'):.0%} of the steady time is the first batches of "
            f"{plural(len(loader.first_batch_waits_s), 'epoch')}: persistent workers do not "
            "restart, but make an epoch's first batches afresh, with the loop waiting"
        )
    part, part_line = _costly_part(loader)
    if part_line:
        evidence.append(part_line)
    # Receiving batches is most of the wait: the main process is the limit, not the workers;
    # unless the workers are at capacity, and the main process receives while they work. Where
    # receiving a batch costs more than a worker takes to make it, the workers do not pay.
    saturated = workers_saturated(m, loader, workers)
    receiving = led.get("transfer") >= 0.5 * led.get(*DATA)
    handover = _handover.measured(m, loader, batches)
    costs_more = handover is not None and handover.costs_more
    transfer = (receiving and not saturated) or costs_more
    contention = worker_line(m, loader, workers, blame_cpus=not transfer)
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
        at = 0 if is_tensor_dataset(loader) else 1  # sample by sample is the cost itself
        fix[at:at] = part_fix(part, loader)
    else:
        pickled = _handover.pickled_batch(loader) if not workers else None
        if pickled is not None:
            evidence.append(pickled[0])
            fix.append(pickled[1])
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
        wants=tuple((b, 1.0) for b in data),
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
    cpus = m.usable_cpus
    if cpus and workers >= cpus:
        # the workers alone fill the CPUs (while the loop waits, its own CPU is theirs too):
        # more only take turns on them
        return (
            f"not more workers: {plural(workers, 'worker')} already fill the {cpus} usable CPUs, "
            "and more only take turns on them; make each batch cheaper (below), or run on more "
            "CPUs"
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
