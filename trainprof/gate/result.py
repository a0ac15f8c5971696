"""What gates judge with and return: the options, a gate's result, the verdict, the exit codes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["pass", "fail", "not measured", "not comparable"]
SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2}

EXIT_PASS = 0  # every gate passed
EXIT_GATE = 1  # a gate failed (or could not judge)
EXIT_USAGE = 2  # bad input (TrainprofError)
EXIT_JOB = 3  # the job crashed or hung


@dataclass(frozen=True)
class GateOptions:
    fail_on: str = "error"  # the lowest severity that fails the findings gate
    allow: tuple[str, ...] = ()  # finding ids that never fail it
    min_samples_per_s: float | None = None
    max_data_wait: float | None = None  # share of step time, 0-1
    max_step_p95_s: float | None = None
    max_peak_rss: int | None = None  # bytes
    min_gpu_util: float | None = None  # percent
    baseline: dict[str, Any] | None = None  # a stored report
    baseline_name: str | None = None  # its path, as the user gave it
    tolerance: float = 0.10  # the drop in samples/s the baseline gate accepts
    repeat: int = 1  # measurement windows asked for


@dataclass(frozen=True)
class GateResult:
    name: str  # the option it checks ("job", "findings", "max-data-wait", ...)
    status: Status
    measured: str  # the value this run had, as shown
    limit: str  # what the gate wants
    message: str  # one line: why it passed or failed
    details: tuple[str, ...] = ()  # more lines (the findings that fail it, the windows)
    findings: tuple[dict[str, Any], ...] = field(default=())  # failing findings (annotations)

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "measured": self.measured,
            "limit": self.limit,
            "message": self.message,
            "details": list(self.details),
        }


@dataclass(frozen=True)
class Verdict:
    gates: tuple[GateResult, ...]
    job_failed: bool  # crashed, hung or timed out: exit 3 whatever the other gates say

    @property
    def exit_code(self) -> int:
        if self.job_failed:
            return EXIT_JOB
        return EXIT_PASS if all(g.passed for g in self.gates) else EXIT_GATE
