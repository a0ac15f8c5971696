"""``trainprof ci``'s verdict: every gate the options ask for, each judging one thing of a report.

Pure: a report dict (and the baseline's) in, verdicts out. A gate that cannot judge says why:
``not measured`` (the run has no such number: no GPU, no DataLoader, no steady state) or ``not
comparable`` (the baseline ran with another batch size, world size, device or precision). Both
fail the build like a miss does: a gate the user asked for never passes silently.

The gates are in ``outcome.py`` (the job, the findings), ``thresholds.py`` and ``baseline.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from trainprof.compare.windows import Window, rate
from trainprof.gate.baseline import baseline_gate, runner_load, window_lines
from trainprof.gate.outcome import crashed_or_hung, findings_gate, job_gate
from trainprof.gate.result import (
    EXIT_GATE,
    EXIT_JOB,
    EXIT_PASS,
    EXIT_USAGE,
    SEVERITY_RANK,
    GateOptions,
    GateResult,
    Status,
    Verdict,
)
from trainprof.gate.sizes import parse_size
from trainprof.gate.thresholds import (
    data_wait_gate,
    gpu_util_gate,
    peak_rss_gate,
    samples_gate,
    step_p95_gate,
)

__all__ = [
    "EXIT_GATE",
    "EXIT_JOB",
    "EXIT_PASS",
    "EXIT_USAGE",
    "SEVERITY_RANK",
    "GateOptions",
    "GateResult",
    "Status",
    "Verdict",
    "evaluate",
    "parse_size",
]


def evaluate(report: dict[str, Any], windows: Sequence[Window], opts: GateOptions) -> Verdict:
    """Every gate the options ask for, in the order the table shows them."""
    job = job_gate(report)
    gates = [job, findings_gate(report, opts)]
    throughput = rate(report, windows, "samples_per_s")  # the windows' median, else the summary
    if opts.min_samples_per_s is not None:
        gate = samples_gate(report, throughput, opts.min_samples_per_s)
        gates.append(dataclasses.replace(gate, details=window_lines(windows)))
    if opts.max_data_wait is not None:
        gates.append(data_wait_gate(report, opts.max_data_wait))
    if opts.max_step_p95_s is not None:
        gates.append(step_p95_gate(report, opts.max_step_p95_s))
    if opts.max_peak_rss is not None:
        gates.append(peak_rss_gate(report, opts.max_peak_rss))
    if opts.min_gpu_util is not None:
        gates.append(gpu_util_gate(report, opts.min_gpu_util))
    if opts.baseline is not None:
        gate = baseline_gate(report, opts, runner_load(windows), windows)
        gates.append(dataclasses.replace(gate, details=window_lines(windows)))
    return Verdict(tuple(gates), job_failed=job.status != "pass" and crashed_or_hung(report))
