"""A session's Metrics: from the probe's timed steps, or from stack samples alone where no probe
timed them (a run directory of `trainprof attach`)."""

from __future__ import annotations

from trainprof.analysis import from_stacks, from_steps
from trainprof.analysis.metrics import Metrics
from trainprof.store.session import Session


def measure(session: Session) -> Metrics:
    """The Metrics the rules and renderers read; pure: the same session, the same Metrics."""
    if isinstance(session.meta.get("attach"), dict):
        return from_stacks.compute(session)
    return from_steps.compute(session)
