"""The report's host rows: CPU, trainprof's own cost, peak memory and GPU utilization, as
sampled from outside."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from trainprof.analysis.metrics import Metrics
from trainprof.render.text import literal
from trainprof.store.host_totals import NO_OWN_COST, OwnCost, PeakMemory
from trainprof.units import fmt_bytes

UNSAMPLED = "not measured: no host sample was taken while the job ran"


def add_host_rows(t: Table, m: Metrics, meta: dict[str, Any] | None = None) -> None:
    """CPU, trainprof's cost, peak memory and GPU utilization, sampled from outside (run and
    attach alike); with ``run``'s run.json, how py-spy's rate was lowered for its cost."""
    t.add_row(
        "CPU",
        UNSAMPLED
        if m.cpu_percent_mean is None
        else f"{m.cpu_percent_mean:.0f}% (job and workers, mean)",
    )
    t.add_row("trainprof cost", own_cost_text(m.own_cost))
    lowered = spy_rate_text(meta.get("stacks") if meta else None)
    if lowered is not None:
        t.add_row("", literal(lowered))
    t.add_row("peak memory", peak_memory_text(m.peak_memory))
    gpu = (
        f"{m.gpu_util_mean:.0f}% mean"
        + (f" ({m.gpus.describe()})" if m.gpus and m.gpus.of > 1 else "")
        if m.gpu_util_mean is not None
        else f"not measured: {m.gpu_unavailable or 'no GPU samples'}"
    )
    t.add_row("GPU", literal(gpu))


def own_cost_text(cost: OwnCost | None) -> str:
    """trainprof's own CPU over the job, as a share of the CPUs it had; the probe's, not
    measured."""
    probe = "the probe inside the job: not measured"
    if cost is None:
        return f"{NO_OWN_COST} · {probe}"
    share = (
        f"{cost.machine_share:.1%} of the job's {cost.usable_cpus} CPUs"
        if cost.machine_share is not None
        else "its share of the machine not measured (usable CPUs unknown)"
    )
    return (
        f"{cost.cpu_s:.2f} CPU-s over {cost.span_s:.1f} s = {share} "
        f"({cost.wall_share:.1%} of one CPU: trainprof {cost.supervisor_s:.2f} s, "
        f"py-spy {cost.helpers_s:.2f} s) · {probe}"
    )


def spy_rate_text(stacks: object) -> str | None:
    """How py-spy's rate was lowered to keep its cost within its budget (run.json's
    ``stacks.rate_changes``); None where it never was."""
    changes = stacks.get("rate_changes") if isinstance(stacks, dict) else None
    if not isinstance(changes, list):
        return None
    changes = [c for c in changes if isinstance(c, dict) and _numbers(c)]
    if not changes:
        return None
    first, last = changes[0], changes[-1]
    rates = " → ".join(f"{c['from_hz']:g}" for c in changes) + f" → {last['to_hz']:g} Hz"
    return (
        f"py-spy lowered its rate {rates} from {first['at_s']:.1f} s on: at "
        f"{first['from_hz']:g} Hz it took {first['spy_cpu']:.1%} of a CPU, over its "
        f"{first['budget']:.1%} budget"
    )


def _numbers(change: dict[str, Any]) -> bool:
    keys = ("at_s", "from_hz", "to_hz", "spy_cpu", "budget")
    return all(isinstance(change.get(k), (int, float)) for k in keys)


def peak_memory_text(peak: PeakMemory | None) -> str:
    """The job's peak memory and its basis: PSS (shared pages counted once) or RSS summed."""
    if peak is None:
        return UNSAMPLED
    if peak.basis == "rss":
        return f"{fmt_bytes(peak.bytes)} RSS (job and workers, summed; PSS not read)"
    text = f"{fmt_bytes(peak.bytes)} PSS (job and workers; shared pages counted once)"
    if peak.rss_sum_bytes is not None and peak.rss_sum_bytes > 1.1 * peak.bytes:
        text += f"; their RSS summed: {fmt_bytes(peak.rss_sum_bytes)}"
    return text
