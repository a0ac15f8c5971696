"""Session → Metrics → Findings, in one call (pure)."""

from __future__ import annotations

from trainprof.analysis import metrics as metrics_mod
from trainprof.analysis.crash import crash_findings
from trainprof.analysis.findings import Verdict
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules import evaluate
from trainprof.store.session import Session


def analyze(session: Session) -> tuple[Metrics, Verdict]:
    m = metrics_mod.compute(session)
    verdict = evaluate(m)
    crashes = crash_findings(session, m)
    if not crashes:
        return m, verdict
    # A crash or hang explains the run before any throughput rule: its findings come first,
    # in the order the signature table chose (the most specific cause first).
    seen = {f.id for f in crashes}
    rest = tuple(f for f in verdict.findings if f.id not in seen)
    return m, Verdict(tuple(crashes) + rest, verdict.skipped)
