"""Rules about the input pipeline: fake batching, input-bound, sampler overhead, worker start-up."""

from __future__ import annotations

from trainprof.analysis.attribution import caller_of, dominant_user_frame, where
from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import LoaderView, Metrics
from trainprof.analysis.stats import median

# fake-batching: a loader batch of 1 and at least this many fetches per optimizer step.
FAKE_BATCH_MIN_FETCHES = 2
# input-bound: share of steady step time spent waiting in DataLoader __next__ (beyond the
# sampler, which has its own rule). TensorFlow's profiler calls >= 20 % "highly input-bound".
INPUT_BOUND_WAIT_FRAC = 0.20
# sampler-overhead: share of step time inside the main-process sampler (_next_index).
SAMPLER_FRAC = 0.10
# worker-startup: an epoch's first batch waits this many times a steady batch, at least
# WORKER_STARTUP_MIN_S, and all epochs' first waits cost this share of the run.
WORKER_STARTUP_FACTOR = 5.0
WORKER_STARTUP_MIN_S = 0.05
WORKER_STARTUP_SHARE = 0.05


def primary_loader(metrics: Metrics) -> LoaderView | None:
    """The loader that feeds training: the first one created (eval loaders come later)."""
    return metrics.loaders[0] if metrics.loaders else None


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds < 10 else f"{seconds:.1f} s"


def _loader_caller(m: Metrics) -> tuple[str, str, int] | None:
    """The user's line that pulls batches from the DataLoader (next(it), for batch in loader)."""
    if m.activity.window is None or not m.activity.spans:
        return None
    return caller_of(m.activity.spans, m.activity.window, "torch/utils/data/")


def suggested_workers(metrics: Metrics) -> int:
    cpus = metrics.usable_cpus or 2
    return max(1, min(8, cpus - 1))


# ---------------------------------------------------------------- fake-batching


def check_fake_batching(m: Metrics) -> Finding | None:
    s = m.steady
    loader = primary_loader(m)
    assert s is not None
    configured = loader.config.get("batch_size") if loader else None
    batch_one = s.batch_size == 1 or configured == 1
    if m.unit != "step" or not batch_one or s.fetches_per_step < FAKE_BATCH_MIN_FETCHES:
        return None
    k = s.fetches_per_step
    evidence = [
        f"{k:.0f} DataLoader fetches per optimizer step, each a batch of 1 "
        f"(DataLoader batch_size={configured})",
        f"{s.steps_per_s:.2f} optimizer steps/s = {s.steps_per_s * k:.1f} samples/s",
        "each sample goes through its own Python iteration, collate and forward pass, "
        f"so the per-sample overhead is paid {k:.0f}× per step",
    ]
    return Finding(
        id="fake-batching",
        severity="warning",
        title=f"Fake batching: {k:.0f} batches of 1 per optimizer step instead of one batch of {k:.0f}",
        evidence=tuple(evidence),
        fix=(
            f"DataLoader(dataset, batch_size={k:.0f}, ...) and one forward/backward per step "
            "instead of a Python loop of next(loader) per sample",
            "if samples differ in length, pad them in a collate_fn "
            "(torch.nn.utils.rnn.pad_sequence) or bucket by length",
            "keep gradient accumulation only for batches larger than memory allows",
        ),
        # An upper bound: on a GPU the per-sample overhead is nearly all of it (seed 000: ~130x).
        impact=min(0.9, 1.0 - 1.0 / k),
        where=where(_loader_caller(m)),
    )


# ---------------------------------------------------------------- input-bound


def check_input_bound(m: Metrics) -> Finding | None:
    s = m.steady
    assert s is not None
    wait_frac = (
        m.activity.train_wait_frac if m.activity.train_wait_frac is not None else s.data_wait_frac
    )
    if wait_frac - s.sampler_frac < INPUT_BOUND_WAIT_FRAC:
        return None
    loader = primary_loader(m)
    cfg = loader.config if loader else {}
    workers = cfg.get("num_workers") or 0
    per_batch = s.wait_per_step_s / max(s.fetches_per_step, 1)
    evidence = [
        f"data wait is {wait_frac:.0%} of steady step time "
        f"({ms(s.wait_per_step_s)} of {ms(s.duration_s / s.count)} per step on average, "
        f"{ms(per_batch)} per batch)",
        f"num_workers={workers} on {m.usable_cpus or '?'} usable CPUs, "
        f"pin_memory={cfg.get('pin_memory')}, persistent_workers={cfg.get('persistent_workers')}, "
        f"prefetch_factor={cfg.get('prefetch_factor')}",
    ]
    fix: list[str] = []
    if loader and loader.main_fetch_ms is not None:
        evidence.append(
            f"in the main process, dataset __getitem__ + collate take {loader.main_fetch_ms:.1f} ms "
            "per batch, while the model waits"
        )
    if loader and loader.worker_fetch_ms is not None and workers:
        capacity = workers * 1e3 / loader.worker_fetch_ms
        evidence.append(
            f"each worker needs {loader.worker_fetch_ms:.1f} ms per batch: {workers} workers "
            f"deliver at most {capacity:.1f} batches/s; the loop asks for "
            f"{s.steps_per_s * max(s.fetches_per_step, 1):.1f}/s"
        )
    if s.sampler_frac >= 0.05:
        evidence.append(
            f"the sampler alone ({cfg.get('batch_sampler') or cfg.get('sampler')}) takes "
            f"{s.sampler_frac:.0%} of step time in the main process"
        )
    if workers == 0:
        fix.append(
            f"DataLoader(..., num_workers={suggested_workers(m)}, persistent_workers=True) "
            "so batches are prepared in parallel with the training step"
        )
    else:
        fix.append(
            "more workers if CPUs are free (num_workers up to usable CPUs - 1), "
            "persistent_workers=True, prefetch_factor=4"
        )
    fix.append(
        "make __getitem__ cheaper: decode/resize once and cache (bounded), "
        "move augmentation to the GPU, store data in a faster format"
    )
    if m.gpu_util_mean is not None:
        fix.append("pin_memory=True and .to(device, non_blocking=True) for host→device copies")
    return Finding(
        id="input-bound",
        severity="warning",
        title=f"Input-bound: the training loop waits for data {wait_frac:.0%} of the time",
        evidence=tuple(evidence),
        fix=tuple(fix),
        impact=wait_frac - s.sampler_frac,
        where=where(_loader_caller(m)),
    )


# ---------------------------------------------------------------- sampler-overhead


def check_sampler_overhead(m: Metrics) -> Finding | None:
    s = m.steady
    assert s is not None
    if s.sampler_frac < SAMPLER_FRAC:
        return None
    loader = primary_loader(m)
    cfg = loader.config if loader else {}
    cls = cfg.get("batch_sampler") if cfg.get("batch_size") is None else cfg.get("sampler")
    cls = cls or cfg.get("batch_sampler") or cfg.get("sampler")
    per_batch = s.sampler_frac * s.p50_s / max(s.fetches_per_step, 1)
    frame = None
    if m.activity.window is not None:
        frame = dominant_user_frame(m.activity.spans, [m.activity.window], through="_next_index")
    return Finding(
        id="sampler-overhead",
        severity="warning",
        title=f"The sampler takes {s.sampler_frac:.0%} of step time in the main process",
        evidence=(
            f"{ms(per_batch)} per batch inside {cls}.__iter__ (DataLoader._next_index), "
            f"{s.sampler_frac:.0%} of steady step time",
            "the sampler runs in the main process even with num_workers > 0, "
            "so workers cannot hide its cost",
        ),
        fix=(
            "precompute per-sample metadata (lengths, modality, labels) once in the sampler's "
            "__init__ and cache it; index arrays instead of re-reading samples every batch",
            "keep __iter__ to cheap index arithmetic (torch.randperm, list slicing)",
        ),
        impact=s.sampler_frac,
        where=where(frame),
    )


# ---------------------------------------------------------------- worker-startup


def check_worker_startup(m: Metrics) -> Finding | None:
    s = m.steady
    loader = primary_loader(m)
    assert s is not None
    if loader is None or not (loader.config.get("num_workers") or 0):
        return None
    firsts = loader.first_batch_waits_s
    if len(firsts) < 2 or loader.config.get("persistent_workers"):
        return None
    wait_frac = (
        m.activity.train_wait_frac if m.activity.train_wait_frac is not None else s.data_wait_frac
    )
    per_batch = wait_frac * s.duration_s / s.count / max(s.fetches_per_step, 1)
    typical = median(firsts)
    span = m.activity.run_span_s
    cost = sum(firsts)
    if typical < max(WORKER_STARTUP_MIN_S, WORKER_STARTUP_FACTOR * per_batch):
        return None
    if not span or cost / span < WORKER_STARTUP_SHARE:
        return None
    workers = loader.config.get("num_workers")
    return Finding(
        id="worker-startup",
        severity="warning",
        title=f"Every epoch waits {ms(typical)} for its first batch while {workers} workers restart",
        evidence=(
            f"{len(firsts)} epochs; first-batch wait per epoch: median {ms(typical)}, "
            f"max {ms(max(firsts))} (a steady batch waits {ms(per_batch)})",
            f"persistent_workers=False: workers are re-created and the dataset re-sent to them "
            f"every epoch, {cost:.2f} s in all ({cost / span:.0%} of the run)",
        ),
        fix=(
            "DataLoader(..., persistent_workers=True) keeps workers alive across epochs",
            "make the dataset cheap to pickle (open files and load indexes lazily in "
            "__getitem__ or worker_init_fn, not in __init__)",
        ),
        impact=min(1.0, cost / span),
    )
