"""The rules table: each row names a pathology, the signals it needs, and a pure check that
returns a Finding (with evidence from this run and the fix) or None.

A rule whose signals are missing is skipped, and the report says why; it never fires on
absent data. Thresholds are module constants, documented where they are defined.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from trainprof.analysis.findings import Finding, Skipped, Verdict, rank
from trainprof.analysis.metrics import LoaderView, Metrics

# fake-batching: a loader batch of 1 and at least this many fetches per optimizer step.
FAKE_BATCH_MIN_FETCHES = 2
# input-bound: share of steady step time spent waiting in DataLoader __next__.
# TensorFlow's profiler calls ≥ 20 % "highly input-bound"; seed 003 targets data_time < 10 ms.
INPUT_BOUND_WAIT_FRAC = 0.20


@dataclass(frozen=True)
class Rule:
    id: str
    title: str
    needs: tuple[str, ...]
    check: Callable[[Metrics], Finding | None]


def _signal_missing(metrics: Metrics, needs: tuple[str, ...]) -> str | None:
    for need in needs:
        if need == "steps" and metrics.steady is None:
            return f"too few {metrics.unit}s to judge a steady state ({metrics.total_steps} seen)"
        if need == "loader" and not metrics.loaders:
            return "no torch DataLoader was iterated"
        if need == "gpu" and metrics.gpu_util_mean is None:
            return f"GPU not measured: {metrics.gpu_unavailable or 'no GPU samples'}"
    return None


def evaluate(metrics: Metrics, rules: tuple[Rule, ...] | None = None) -> Verdict:
    findings: list[Finding] = []
    skipped: list[Skipped] = []
    for rule in rules if rules is not None else RULES:
        reason = _signal_missing(metrics, rule.needs)
        if reason is not None:
            skipped.append(Skipped(rule.id, reason))
            continue
        finding = rule.check(metrics)
        if finding is not None:
            findings.append(finding)
    return Verdict(rank(findings), tuple(skipped))


def primary_loader(metrics: Metrics) -> LoaderView | None:
    """The loader that feeds training: the first one created (eval loaders come later)."""
    return metrics.loaders[0] if metrics.loaders else None


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds < 10 else f"{seconds:.1f} s"


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
    )


# ---------------------------------------------------------------- input-bound


def check_input_bound(m: Metrics) -> Finding | None:
    s = m.steady
    assert s is not None
    if s.data_wait_frac < INPUT_BOUND_WAIT_FRAC:
        return None
    loader = primary_loader(m)
    cfg = loader.config if loader else {}
    workers = cfg.get("num_workers") or 0
    per_batch = s.wait_per_step_s / max(s.fetches_per_step, 1)
    evidence = [
        f"data wait is {s.data_wait_frac:.0%} of steady step time "
        f"({_ms(s.wait_per_step_s)} of {_ms(s.p50_s)} per step at the median, "
        f"{_ms(per_batch)} per batch)",
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
        title=f"Input-bound: the training loop waits for data {s.data_wait_frac:.0%} of the time",
        evidence=tuple(evidence),
        fix=tuple(fix),
        impact=s.data_wait_frac,
    )


RULES: tuple[Rule, ...] = (
    Rule("fake-batching", "Fake batching", ("steps", "loader"), check_fake_batching),
    Rule("input-bound", "Input-bound", ("steps", "loader"), check_input_bound),
)
