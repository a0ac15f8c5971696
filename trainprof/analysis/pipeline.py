"""Session → Metrics → Findings, in one call (pure)."""

from __future__ import annotations

from trainprof.analysis import metrics as metrics_mod
from trainprof.analysis.findings import Verdict
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules import evaluate
from trainprof.store.session import Session


def analyze(session: Session) -> tuple[Metrics, Verdict]:
    m = metrics_mod.compute(session)
    return m, evaluate(m)
