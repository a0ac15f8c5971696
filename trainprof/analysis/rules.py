"""The rules table: each row names a pathology, the signals it needs, and a pure check that
returns a Finding (with evidence from this run and the fix) or None.

A rule whose signals are missing is skipped, and the report says why; it never fires on
absent data. Thresholds are module constants, documented where they are defined.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from trainprof.analysis import checks_gpu, checks_host, checks_loader, checks_stalls
from trainprof.analysis.findings import Finding, Skipped, Verdict, rank
from trainprof.analysis.metrics import Metrics


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
        if need == "stacks" and metrics.activity.profile is None:
            return f"no stack samples: {metrics.activity.stacks_error or 'py-spy did not run'}"
        if (
            need == "samples"
            and metrics.peak_rss_bytes is None
            and metrics.activity.swap_total is None
        ):
            return "no host samples"
        if need == "cuda" and not checks_gpu.on_cuda(metrics):
            return "the model does not train on a CUDA device"
        if need == "ranks" and len(metrics.activity.ranks) < 2:
            return "not a multi-rank (torchrun) job"
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
    findings = _only_if_unexplained(findings)
    return Verdict(rank(findings), tuple(skipped))


def _only_if_unexplained(findings: list[Finding]) -> list[Finding]:
    """gpu-underutilized is the rule of last resort: dropped when a specific cause was found."""
    specific = [f for f in findings if f.id != "gpu-underutilized" and f.severity != "info"]
    return [f for f in findings if f.id != "gpu-underutilized" or not specific]


RULES: tuple[Rule, ...] = (
    Rule("fake-batching", "Fake batching", ("steps", "loader"), checks_loader.check_fake_batching),
    Rule("input-bound", "Input-bound", ("steps", "loader"), checks_loader.check_input_bound),
    Rule(
        "sampler-overhead",
        "Sampler overhead",
        ("steps", "loader"),
        checks_loader.check_sampler_overhead,
    ),
    Rule(
        "worker-startup", "Worker start-up", ("steps", "loader"), checks_loader.check_worker_startup
    ),
    Rule("cpu-stall", "CPU stall", ("steps",), checks_stalls.check_cpu_stall),
    Rule("checkpoint-stall", "Checkpoint stall", ("steps",), checks_stalls.check_checkpoint_stall),
    Rule("eval-stall", "Eval stall", ("steps",), checks_stalls.check_eval_stall),
    Rule(
        "logging-overhead",
        "Logging overhead",
        ("steps", "stacks"),
        checks_host.check_logging_overhead,
    ),
    Rule("loop-overhead", "Loop overhead", ("steps", "stacks"), checks_host.check_loop_overhead),
    Rule("memory-growth", "Memory growth", ("steps", "samples"), checks_host.check_memory_growth),
    Rule("swap-pressure", "Swap pressure", ("samples",), checks_host.check_swap_pressure),
    Rule(
        "no-mixed-precision",
        "No mixed precision",
        ("steps", "cuda"),
        checks_gpu.check_no_mixed_precision,
    ),
    Rule(
        "pageable-memory",
        "Pageable memory",
        ("steps", "cuda", "loader"),
        checks_gpu.check_pageable_memory,
    ),
    Rule("host-sync", "Host syncs", ("steps", "cuda", "stacks"), checks_gpu.check_host_sync),
    Rule("straggler-rank", "Straggler rank", ("ranks",), checks_gpu.check_straggler_rank),
    Rule(
        "gpu-underutilized",
        "GPU under-utilized",
        ("steps", "gpu"),
        checks_host.check_gpu_underutilized,
    ),
)
