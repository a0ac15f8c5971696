"""A session's Metrics: from the probe's timed steps, or from stack samples alone where the job
was only sampled from outside (no probe timed a step in it)."""

from __future__ import annotations

from trainprof.analysis import from_stacks, from_steps
from trainprof.analysis.metrics import Metrics
from trainprof.store.session import Session


def measure(session: Session) -> Metrics:
    """The Metrics the rules and renderers read; pure: the same session, the same Metrics."""
    if session.sampled is not None:  # stacks recorded from outside, and nothing from inside
        return from_stacks.compute(session, session.sampled)
    return from_steps.compute(session)
