"""What trainprof adds to an experiment tracker's run: summary metrics, findings and the HTML page.

Both ``--mlflow`` and ``--wandb`` add the same things: the measured summary numbers (a number
that was not measured is left out, never 0), the findings as Markdown and as rows, and the HTML
report. The job's own run is the one the probe noted (``trackers``), from its main process.
"""

from __future__ import annotations

from typing import Any

from trainprof.store.session import Session

PREFIX = "trainprof/"


def metrics(report: dict[str, Any]) -> dict[str, float]:
    """The summary numbers that were measured, named ``trainprof/<name>``."""
    s = report.get("summary") or {}
    peak = (s.get("peak_memory") or {}).get("bytes")
    cost = s.get("trainprof_cost") or {}
    step = s.get("step_time_s") or {}
    values = {
        "steps": s.get("steps"),
        "steps_per_s": s.get("steps_per_s"),
        "samples_per_s": s.get("samples_per_s"),
        "step_time_p50_s": step.get("p50"),
        "step_time_p95_s": step.get("p95"),
        "data_wait_share": s.get("data_wait_frac"),
        "peak_memory_bytes": peak,
        "gpu_util_mean_percent": s.get("gpu_util_mean"),
        "mfu": s.get("mfu"),
        "cpu_percent_mean": s.get("cpu_percent_mean"),
        "cost_cpu_percent_mean": s.get("trainprof_cpu_percent_mean"),
        "cost_machine_share": cost.get("machine_share"),
        "findings": len(report.get("findings") or []),
    }
    return {
        PREFIX + k: float(v)
        for k, v in values.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    }


def verdict(report: dict[str, Any]) -> str | None:
    """The bottleneck verdict, where one was judged."""
    bottleneck = (report.get("summary") or {}).get("bottleneck") or {}
    value = bottleneck.get("verdict") if isinstance(bottleneck, dict) else None
    return str(value) if value else None


COLUMNS = ["rank", "id", "severity", "share", "title", "where", "fix"]


def finding_rows(report: dict[str, Any]) -> list[list[Any]]:
    """One row per finding, in the report's order: COLUMNS (share None where unmeasured)."""
    rows = []
    for i, f in enumerate(report.get("findings") or [], 1):
        impact = f.get("impact")
        rows.append(
            [
                i,
                str(f.get("id")),
                str(f.get("severity")),
                float(impact) if isinstance(impact, (int, float)) else None,
                str(f.get("title") or ""),
                str(f.get("where") or ""),
                "; ".join(str(x) for x in (f.get("fix") or [])),
            ]
        )
    return rows


def findings_markdown(report: dict[str, Any]) -> str:
    """The findings as Markdown: id, severity, share, evidence, where and fix of each."""
    findings = report.get("findings") or []
    if not findings:
        return "trainprof found no problem in this run.\n"
    lines = ["# trainprof findings", ""]
    for i, f in enumerate(findings, 1):
        impact = f.get("impact")
        share = f", {impact:.0%} of the time" if isinstance(impact, (int, float)) else ""
        lines.append(f"## {i}. {f.get('id')} ({f.get('severity')}{share})")
        lines.append("")
        lines.append(str(f.get("title") or ""))
        lines.append("")
        lines.extend(f"- {e}" for e in f.get("evidence") or [])
        if f.get("where"):
            lines.append(f"- where: `{f['where']}`")
        lines.extend(f"- fix: {x}" for x in f.get("fix") or [])
        lines.append("")
    return "\n".join(lines)


def html_report(session: Session) -> str:
    """The run's HTML report, as ``--html`` writes it (the run is analysed again)."""
    from trainprof.analysis.pipeline import analyze
    from trainprof.render import html, trace

    m, v = analyze(session)
    return html.render(session, m, v, trace.build(session, m))


def job_run(session: Session, key: str) -> dict[str, Any] | None:
    """The run the probe noted as info ``key``: the first of the main process (or rank 0),
    else of any process."""
    found: list[tuple[int, dict[str, Any]]] = []
    for log in session.processes:
        for info in log.infos:
            value = info.get(key)
            if isinstance(value, dict):
                first = log.role == "main" or log.header.get("rank") == 0
                found.append((0 if first else 1, value))
                break
    return min(found, key=lambda x: x[0])[1] if found else None


def job_name(session: Session) -> str:
    """The name a run of trainprof's own gets: the run directory's name."""
    from pathlib import Path

    return "trainprof " + Path(str(session.run_dir)).name
