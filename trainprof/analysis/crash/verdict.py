"""Crashes and hangs: the job's stderr matched against the signature table, with the limits
measured during the run as evidence, and a hang finding when the runner saw the job stop
making progress. Pure."""

from __future__ import annotations

from typing import Any

from trainprof.analysis.crash.context import crash_context
from trainprof.analysis.crash.matcher import match_signatures
from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.store.session import Session


def crash_findings(session: Session, metrics: Metrics) -> list[Finding]:
    """Signature findings first (most specific), then the hang finding if the job hung."""
    found = match_signatures(session.stderr_tail, crash_context(session, metrics))
    hang = session.meta.get("hang")
    if not hang:
        return found
    evidence = hang_evidence(hang, metrics)
    causes = [f for f in found if f.severity == "error"]
    if causes:
        first = causes[0]
        merged = Finding(
            id=first.id,
            severity=first.severity,
            title=first.title + " (the job hung)",
            evidence=first.evidence + tuple(evidence),
            fix=first.fix,
            impact=first.impact,
            where=first.where,
        )
        found = [merged] + [f for f in found if f is not first]
    return found + [
        Finding(
            id="hang",
            severity="error",
            title=hang_title(hang),
            evidence=tuple(evidence),
            fix=(
                "read the stacks in the run directory: the main thread's innermost frame is "
                "where it waits",
                "a main thread blocked in the DataLoader queue means a worker died or cannot "
                "send (check ulimit -n, /dev/shm, worker errors above)",
                "run with DataLoader(num_workers=0) once to see the error in the main process",
            ),
            impact=None,
        )
    ]


def hang_title(hang: dict[str, Any]) -> str:
    if hang.get("steps_before"):
        return f"The job hung: no step for {float(hang.get('silent_s') or 0):.0f} s"
    return f"The job hung: no first step within {float(hang.get('silent_s') or 0):.0f} s"


def hang_evidence(hang: dict[str, Any], metrics: Metrics) -> list[str]:
    lines = []
    steps = hang.get("steps_before") or 0
    if steps:
        p50 = metrics.steady.p50_s if metrics.steady else None
        typical = f" (steps took {p50 * 1e3:.0f} ms at the median)" if p50 else ""
        lines.append(
            f"no progress for {float(hang.get('silent_s') or 0):.1f} s after {steps} steps{typical}"
        )
    else:
        lines.append(f"no first step after {float(hang.get('silent_s') or 0):.1f} s")
    main = hang.get("main_stack")
    if main:
        lines.append(f"main thread was waiting in: {main}")
    if hang.get("stacks_file"):
        lines.append(
            f"stacks of the main process and {hang.get('workers', 0)} workers: {hang['stacks_file']}"
        )
    return lines
