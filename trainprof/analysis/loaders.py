"""The job's DataLoaders as the probe recorded them: which is the training loader, and its
settings, per-batch counts and workers."""

from __future__ import annotations

import bisect

from trainprof.analysis.metrics import BatchKind, LoaderView
from trainprof.store.events import ProcessLog
from trainprof.store.session import Session


def epoch_first_steps(log: ProcessLog) -> list[int]:
    """Each worker's first batch of an epoch carries that worker's start-up: the first
    num_workers steps after every epoch start of the training loader."""
    ts = log.steps["t"]
    workers = num_workers(log)
    out: list[int] = []
    train = training_loader_keys(log)
    for key, t_iter, _w in log.epochs:
        if key in train:
            i = bisect.bisect_right(ts, t_iter)
            out.extend(range(i, min(i + workers, len(ts))))
    return out


def num_workers(log: ProcessLog) -> int:
    """The training loader's workers, at least 1 (a corrupt count reads as 1)."""
    n = (log.loaders.get(training_loader_key(log)) or {}).get("num_workers")
    return n if isinstance(n, int) and 1 <= n <= 1024 else 1


def training_loader_key(log: ProcessLog) -> int:
    """The loader whose batches feed the optimizer steps: of those whose ``batch_size`` is the
    steps' usual batch size (all, where none or no step says), the last to start an epoch at
    or before the first step.

    A loader iterated before the first step and left (Lightning's sanity-check validation, a
    batch peeked at to size the model) started its pass earlier, and its batches are not the
    steps'. Without epochs recorded, the first loader created."""
    ts = log.steps["t"]
    first = ts[0] if len(ts) else None
    started = [(t, k) for k, t, _w in log.epochs if first is None or t <= first]
    sized = _by_batch_size(log) & {k for _t, k in started}
    candidates = [(t, k) for t, k in started if k in sized] if sized else started
    return max(candidates)[1] if candidates else min(log.loaders, default=0)


def training_loader_keys(log: ProcessLog) -> set[int]:
    """The training loader's key, and the keys of the DataLoaders built anew over the same
    dataset object with its batch size and sampler (a loop that builds its loader each
    epoch): one loader to the analysis, each object starting its own workers."""
    train = training_loader_key(log)
    cfg = log.loaders.get(train) or {}
    same = ("dataset_id", "batch_size", "sampler", "batch_sampler")
    if cfg.get("dataset_id") is None:
        return {train}
    return {train} | {
        k for k, other in log.loaders.items() if all(other.get(f) == cfg.get(f) for f in same)
    }


def _by_batch_size(log: ProcessLog) -> set[int]:
    """The loaders whose configured ``batch_size`` is the median batch of the steps (the
    leading dimension of each step's first batch); empty where that tells none apart."""
    sizes = sorted(n for n in log.steps["batch_size"] if n > 0)
    if not sizes:
        return set()
    usual = sizes[len(sizes) // 2]
    keys = {k for k, cfg in log.loaders.items() if cfg.get("batch_size") == usual}
    return keys if 0 < len(keys) < len(log.loaders) else set()


def loader_views(session: Session, primary: ProcessLog | None) -> tuple[LoaderView, ...]:
    """Every loader's view, the training loader's first (``training_loader_key``)."""
    if primary is None:
        return ()
    workers = session.workers
    w_count = sum(w.fetch_count for w in workers)
    w_us = sum(w.fetch_us for w in workers)
    w_collate = sum(w.collate_us for w in workers)
    views = []
    train = training_loader_key(primary)
    rebuilt = training_loader_keys(primary) - {train}  # the training loader's again
    # the training loader first: rules and renderers read it as loaders[0]
    for key, cfg in sorted(primary.loaders.items(), key=lambda kv: (kv[0] != train, kv[0])):
        if key in rebuilt:
            continue
        uses_workers = (cfg.get("num_workers") or 0) > 0
        main_ms = (
            primary.fetch_us / primary.fetch_count / 1e3
            if primary.fetch_count and not uses_workers
            else None
        )
        worker_ms = w_us / w_count / 1e3 if w_count and uses_workers else None
        keys = {key} | (rebuilt if key == train else set())
        passes = [(t, w) for k, t, w in primary.epochs if k in keys]
        firsts = tuple(w / 1e6 for _t, w in passes)
        sampler_epochs = tuple(
            int(i["sampler_epoch"][1])
            for i in primary.infos
            if isinstance(i.get("sampler_epoch"), list)
            and len(i["sampler_epoch"]) == 2
            and i["sampler_epoch"][0] == key
            and type(i["sampler_epoch"][1]) is int
        )
        views.append(
            LoaderView(
                cfg,
                main_ms,
                worker_ms,
                firsts,
                main_collate_ms=primary.collate_us / primary.fetch_count / 1e3
                if main_ms is not None
                else None,
                worker_collate_ms=w_collate / w_count / 1e3 if worker_ms is not None else None,
                main_pin_ms=primary.pin_us / primary.fetch_count / 1e3
                if main_ms is not None
                else None,
                sampler_epochs=sampler_epochs,
                main_batch=_batch_kind(primary) if main_ms is not None else None,
                built=len(keys),
                first_batch_windows=tuple(
                    (primary.t0 + t / 1e6, primary.t0 + (t + w) / 1e6) for t, w in passes
                ),
            )
        )
    return tuple(views)


def _batch_kind(log: ProcessLog) -> BatchKind | None:
    """The probe's record of the process's first batch (probe/batch_kind.py)."""
    rec = next((i["batch_kind"] for i in log.infos if isinstance(i.get("batch_kind"), dict)), None)
    names = ("tensors", "arrays", "other", "array_bytes")
    if rec is None or not all(type(rec.get(n)) is int for n in names):
        return None
    return BatchKind(*(int(rec[n]) for n in names))
