"""What a doctor check returns: the shared Finding plus the area and ok/warn/fail status."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from trainprof.analysis.findings import Finding, Severity
from trainprof.units import fmt_bytes as _fmt_bytes

Status = Literal["ok", "warn", "fail"]

SEVERITY_OF: dict[str, Severity] = {"fail": "error", "warn": "warning", "ok": "info"}

# Areas in the order the console and the JSON list them: the job's inputs first, then where
# it runs (CPU, memory), then torch and the GPUs, then attach and disk.
AREAS: tuple[str, ...] = ("shm", "limits", "cpu", "memory", "torch", "gpu", "attach", "disk")

GiB = 1024**3
MiB = 1024**2


@dataclass(frozen=True)
class CheckResult:
    """One row of the doctor's verdict.

    The finding carries the measured value and the threshold (with its reason) in
    ``evidence`` and the concrete change in ``fix``; ``status`` is the ok/warn/fail the
    severity was derived from, kept so the JSON and the exit code never re-derive it.
    """

    area: str
    status: Status
    finding: Finding

    def to_json(self) -> dict[str, object]:
        return {"area": self.area, "status": self.status, **self.finding.to_json()}


def result(
    area: str,
    status: Status,
    id: str,
    title: str,
    evidence: Iterable[str] = (),
    fix: Iterable[str] = (),
) -> CheckResult:
    """Build a CheckResult whose Finding severity follows from ``status`` (never set twice)."""
    finding = Finding(
        id=id,
        severity=SEVERITY_OF[status],
        title=title,
        evidence=tuple(evidence),
        fix=tuple(fix) if status != "ok" else (),
    )
    return CheckResult(area=area, status=status, finding=finding)


def fmt_bytes(n: float | None) -> str:
    """Human size in binary units (trainprof.units, as the run report says them)."""
    return _fmt_bytes(n, missing="unknown")
