"""The one result type every rule and doctor check produces, and how findings are ranked."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Severity = Literal["error", "warning", "info"]

SEVERITY_RANK: dict[str, int] = {"error": 0, "warning": 1, "info": 2}
# What a finding's cause harms: "results" (the model trains on wrong data, or part of it not at
# all), "debug" (a debugging mode left on in training), "time" (only how fast it trains).
Harm = Literal["results", "debug", "time"]
HARM_RANK: dict[str, int] = {"results": 0, "debug": 1, "time": 2}


@dataclass(frozen=True)
class Finding:
    """A diagnosis: what is wrong, the numbers from this run that prove it, and what to change.

    ``impact`` is the share of steady-state wall time the problem costs (0..1): the seconds it
    claimed from the time ledger, or None when it claims none (memory, precision, crashes).
    ``where`` is ``file:line`` in the user's own code when known; ``hotspot`` a second location,
    the hot line inside the function ``where`` calls. ``wants`` is what a rule's check asks of
    the ledger, (bucket, fraction); ``claimed`` what it got, (bucket, seconds).
    """

    id: str
    severity: Severity
    title: str
    evidence: tuple[str, ...] = ()
    fix: tuple[str, ...] = ()
    impact: float | None = None
    where: str | None = None
    hotspot: str | None = None
    wants: tuple[tuple[str, float], ...] = ()
    claimed: tuple[tuple[str, float], ...] = ()
    harm: Harm = "time"  # set from its rule: what ranks it before findings of time alone

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "severity": self.severity,
            "title": self.title,
            "impact": None if self.impact is None else round(self.impact, 4),
            "evidence": list(self.evidence),
            "where": self.where,
            "hotspot": self.hotspot,
            "claims": {b: round(s, 6) for b, s in self.claimed},
            "fix": list(self.fix),
        }


@dataclass(frozen=True)
class Skipped:
    """A rule that could not be judged because its signals are missing (never read as zero)."""

    id: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"id": self.id, "reason": self.reason}


@dataclass(frozen=True)
class Verdict:
    """Findings ordered most harmful first, plus the rules that were skipped and why."""

    findings: tuple[Finding, ...] = ()
    skipped: tuple[Skipped, ...] = field(default_factory=tuple)


def rank(findings: list[Finding] | tuple[Finding, ...]) -> tuple[Finding, ...]:
    """Most harmful first: wrong results, then a debug mode left on, then time (information
    last); then severity, impact (unknown impact after known), and id."""
    return tuple(
        sorted(
            findings,
            key=lambda f: (
                f.severity == "info",
                HARM_RANK[f.harm],
                SEVERITY_RANK[f.severity],
                -(f.impact if f.impact is not None else -1.0),
                f.id,
            ),
        )
    )
