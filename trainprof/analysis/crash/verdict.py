"""Crashes and hangs: the job's stderr matched against the signature table, with the limits
measured during the run as evidence, and a hang finding when the runner saw the job stop
making progress. Pure."""

from __future__ import annotations

from dataclasses import replace

from trainprof.analysis.crash.context import crash_context
from trainprof.analysis.crash.hang import hang_finding
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
    roles = {p.pid: p.role for p in session.processes}
    verdict = hang_finding(hang, session.hang_dumps, roles, metrics)
    causes = [f for f in found if f.severity == "error"]
    if causes:
        first = causes[0]
        merged = replace(
            first,
            title=first.title + " (the job hung)",
            evidence=first.evidence + verdict.evidence,
        )
        found = [merged] + [f for f in found if f is not first]
    return found + [verdict]
