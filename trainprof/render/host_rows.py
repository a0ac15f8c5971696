"""The report's host rows: CPU, peak memory and GPU utilization, as sampled from outside."""

from __future__ import annotations

from rich.table import Table

from trainprof.analysis.metrics import Metrics
from trainprof.render.text import literal
from trainprof.units import fmt_bytes


def add_host_rows(t: Table, m: Metrics) -> None:
    """CPU, peak memory and GPU utilization, as sampled from outside (run and attach alike)."""
    unsampled = "not measured: no host sample was taken while the job ran"
    own = m.trainprof_cpu_percent_mean
    t.add_row(
        "CPU",
        unsampled
        if m.cpu_percent_mean is None
        else f"{m.cpu_percent_mean:.0f}% (job and workers, mean)"
        + (f" · trainprof itself {own:.0f}%" if own is not None else ""),
    )
    t.add_row(
        "peak memory",
        unsampled
        if m.peak_rss_bytes is None
        else f"{fmt_bytes(m.peak_rss_bytes)} RSS (job and workers)",
    )
    gpu = (
        f"{m.gpu_util_mean:.0f}% mean"
        + (f" ({m.gpus.describe()})" if m.gpus and m.gpus.of > 1 else "")
        if m.gpu_util_mean is not None
        else f"not measured: {m.gpu_unavailable or 'no GPU samples'}"
    )
    t.add_row("GPU", literal(gpu))
