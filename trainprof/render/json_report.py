"""The report contract (DESIGN.md section 5) as a plain dict."""

from __future__ import annotations

import math
from typing import Any

from trainprof.analysis.findings import Verdict
from trainprof.analysis.metrics import Metrics
from trainprof.render.console import relative_to
from trainprof.render.quiet_note import unread_only
from trainprof.render.ranks import ranks_json
from trainprof.store.host_totals import NO_OWN_COST, own_cost_json
from trainprof.version import __version__

SCHEMA = "trainprof.report/1"


def _num(v: float | None, digits: int = 4) -> float | None:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return round(float(v), digits)


def report_dict(meta: dict[str, Any], metrics: Metrics, verdict: Verdict) -> dict[str, Any]:
    s = metrics.steady
    return {
        "schema": SCHEMA,
        "trainprof_version": __version__,
        "run": {
            "command": meta.get("command", []),
            "python": meta.get("python"),  # the job's interpreter: {"path", "chosen"}, or null
            "hint": meta.get("hint"),  # why the job failed because of how it was started
            "exit_code": meta.get("exit_code"),
            "signal": meta.get("signal"),
            "killed_at_shutdown": meta.get("killed_at_shutdown"),
            # stopped by a signal (SIGSTOP, Ctrl-Z) and continued: {"total_s", "spans"}, or null
            "suspended": meta.get("suspended"),
            "wall_s": _num(meta.get("wall_s"), 3),
            "run_dir": meta.get("run_dir"),
            "stopped_by": meta.get("stopped_by"),
            "pid": meta.get("pid"),
            "recording": meta.get("recording"),  # set when recording stopped (disk full)
            "probe": meta.get("probe"),
            "exception": meta.get("exception"),
            # `trainprof attach`: what was sampled and what the stacks gave (null for `run`)
            "attach": metrics.outside.to_json() if metrics.outside else None,
            "nodes": meta.get("nodes"),  # a merged multi-node report: its nodes and clocks
        },
        "summary": {
            # attach counts no steps, and without the probe none could be seen: null, not 0
            "steps": None
            if metrics.outside or metrics.probe_missing or unread_only(metrics)
            else metrics.total_steps,
            "unit": metrics.unit,
            "warmup_steps_excluded": metrics.warmup_steps,
            "steps_per_s": _num(s.steps_per_s) if s else None,
            "samples_per_s": _num(s.samples_per_s) if s else None,
            "step_time_s": (
                {"p50": _num(s.p50_s, 6), "p95": _num(s.p95_s, 6), "max": _num(s.max_s, 6)}
                if s
                else None
            ),
            "data_wait_frac": _num(s.data_wait_frac) if s else None,  # None: not measured
            "data_wait_frac_outside_evals": _num(metrics.activity.steps_wait_outside_evals),
            "compile_s": _num(metrics.activity.compile_s, 3),
            "bottleneck": metrics.bottleneck.to_json() if metrics.bottleneck else None,
            "mfu": metrics.mfu.to_json() if metrics.mfu else None,
            "device_timeline_error": metrics.activity.timeline_error,
            "probe_errors": list(metrics.activity.probe_errors),
            "gpu_util_mean": _num(metrics.gpu_util_mean, 2),
            "gpus": metrics.gpus.to_json() if metrics.gpus else None,
            "cpu_percent_mean": _num(metrics.cpu_percent_mean, 2),
            "trainprof_cpu_percent_mean": _num(metrics.trainprof_cpu_percent_mean, 2),
            # the loop's wait for a CPU and who had the CPUs, over the steady window
            "cpu_load": metrics.cpu_starvation.to_json() if metrics.cpu_starvation else None,
            "workers_cpu": metrics.worker_load.to_json() if metrics.worker_load else None,
            # the job's peak memory: PSS summed over its processes where read ("basis": "pss"),
            # else RSS summed ("rss", which counts pages shared with forked workers per process)
            "peak_rss_bytes": metrics.peak_rss_bytes,
            "peak_memory": metrics.peak_memory.to_json() if metrics.peak_memory else None,
            # trainprof's own processes' CPU while the job ran, and its share of the machine
            "trainprof_cost": own_cost_json(metrics.own_cost, NO_OWN_COST),
        },
        "ledger": metrics.ledger.to_json() if metrics.ledger else None,
        "device": metrics.device.to_json() if metrics.device else None,
        "ranks": ranks_json(metrics.activity.ranks),
        "findings": [_located(f.to_json(), meta.get("cwd")) for f in verdict.findings],
        "skipped": [s.to_json() for s in verdict.skipped],
    }


def _located(finding: dict[str, Any], cwd: str | None) -> dict[str, Any]:
    """The finding with the paths in its ``where``, ``hotspot``, evidence and fixes relative to
    the run's working directory where they lie under it (absolute elsewhere: an installed
    library), as the console shows them."""
    rel = relative_to(cwd)
    for key in ("where", "hotspot"):
        if isinstance(finding.get(key), str):
            finding[key] = rel(finding[key])
    for key in ("evidence", "fix"):
        if isinstance(finding.get(key), list):
            finding[key] = [rel(x) if isinstance(x, str) else x for x in finding[key]]
    return finding
