"""The gates every ``trainprof ci`` run has: the job ended cleanly; no finding fails the build."""

from __future__ import annotations

import math
from typing import Any

from trainprof.analysis.metrics import MIN_STEADY_S
from trainprof.gate.result import SEVERITY_RANK, GateOptions, GateResult
from trainprof.units import plural


def crashed_or_hung(report: dict[str, Any]) -> bool:
    run = report.get("run") or {}
    return run.get("stopped_by") in ("hang", "timeout", "interrupt", "runner-died") or (
        run.get("exit_code") != 0
    )


def job_gate(report: dict[str, Any]) -> GateResult:
    """No crash, no hang, no timeout, and at least one step measured."""
    run = report.get("run") or {}
    code, stopped = run.get("exit_code"), run.get("stopped_by")
    wall = run.get("wall_s")
    after = f" after {wall:.1f} s" if isinstance(wall, (int, float)) else ""
    steps = (report.get("summary") or {}).get("steps") or 0
    limit = "exit 0, no hang"
    if stopped == "hang":
        return GateResult(
            "job",
            "fail",
            "hung",
            limit,
            f"the job hung{after}: no progress after {plural(steps, 'step')}; trainprof "
            f"stopped it (exit code {code}); the stacks are in the run directory's "
            "hang-stacks.txt",
        )
    if stopped == "timeout":
        return GateResult(
            "job",
            "fail",
            "timed out",
            limit,
            f"the job did not end within --timeout ({plural(steps, 'step')} made); trainprof "
            f"stopped it (exit code {code})",
        )
    if code is None:
        return GateResult(
            "job", "fail", "no exit code", limit, "the job's end was not recorded (runner died)"
        )
    if code != 0:
        exc = run.get("exception") or {}
        why = f": {exc.get('type')}: {exc.get('message')}" if exc.get("type") else ""
        signal = ""
        if run.get("signal"):
            when = " as Python shut down, after the script ended"
            signal = f" (killed by {run['signal']}{when if run.get('killed_at_shutdown') else ''})"
        return GateResult(
            "job",
            "fail",
            f"exit {code}",
            limit,
            f"the job crashed{after} with exit code {code}{signal}{why}"[:500],
        )
    probe = run.get("probe") or {}
    if probe.get("loaded") is False:
        return GateResult(
            "job",
            "fail",
            "no probe",
            limit,
            f"the job exited 0, but the probe did not load in it ({probe.get('reason')}), so "
            "no step could be measured",
        )
    if steps == 0:
        return GateResult(
            "job",
            "fail",
            "no steps",
            limit,
            "the job exited 0 without a single optimizer step or DataLoader batch: there was "
            "nothing to measure (does the script train when run this way?)",
        )
    how = "stopped cleanly after --steps" if stopped == "steps" else "exited 0"
    took = f" ({wall:.1f} s)" if isinstance(wall, (int, float)) else ""
    return GateResult("job", "pass", "exit 0", limit, f"the job {how}{took}")


def findings_gate(report: dict[str, Any], opts: GateOptions) -> GateResult:
    floor = SEVERITY_RANK[opts.fail_on]
    findings = report.get("findings") or []
    failing = [
        f
        for f in findings
        if SEVERITY_RANK.get(f.get("severity", ""), 0) >= floor and f.get("id") not in opts.allow
    ]
    allowed = [
        f
        for f in findings
        if SEVERITY_RANK.get(f.get("severity", ""), 0) >= floor and f.get("id") in opts.allow
    ]
    limit = "no error" if opts.fail_on == "error" else "no warning or error"
    counts = {s: sum(f.get("severity") == s for f in findings) for s in ("error", "warning")}
    measured = ", ".join(plural(n, s) for s, n in counts.items() if n) or "none"
    details = tuple(_finding_line(f) for f in failing) + tuple(
        f"allowed (--allow): {_finding_line(f)}" for f in allowed
    )
    if failing:
        ids = ", ".join(str(f.get("id")) for f in failing)
        return GateResult(
            "findings",
            "fail",
            measured,
            limit,
            f"{plural(len(failing), 'finding')} at or above --fail-on {opts.fail_on}: {ids}",
            details,
            tuple(failing),
        )
    unjudged = _unjudged(report)
    if unjudged is not None:
        return GateResult("findings", "not measured", measured, limit, unjudged, details)
    return GateResult(
        "findings",
        "pass",
        measured,
        limit,
        f"no finding at or above --fail-on {opts.fail_on}"
        + (f" ({len(allowed)} allowed)" if allowed else ""),
        details,
    )


# The reasons the rule registry gives when the run was too short for its rules to judge.
_TOO_SHORT = ("the steady state is too short to judge", "too few ")


def _unjudged(report: dict[str, Any]) -> str | None:
    """Why "no finding" means nothing: the job ended cleanly, but too soon for the rules that
    judge a steady state (a crash or hang is the job gate's news, not this)."""
    run = report.get("run") or {}
    if run.get("exit_code") != 0 or run.get("stopped_by") in ("hang", "timeout"):
        return None
    skipped = [
        s for s in report.get("skipped") or [] if str(s.get("reason", "")).startswith(_TOO_SHORT)
    ]
    if not skipped:
        return None
    summary = report.get("summary") or {}
    rate, warm = summary.get("steps_per_s"), summary.get("warmup_steps_excluded") or 0
    hint = "raise --steps"
    if isinstance(rate, (int, float)) and rate > 0:
        hint += f" (about {math.ceil(rate * MIN_STEADY_S * 1.5) + warm} steps here)"
    return f"{plural(len(skipped), 'rule')} could not judge: {skipped[0]['reason']}; {hint}"


def _finding_line(f: dict[str, Any]) -> str:
    where = f" at {f['where']}" if f.get("where") else ""
    return f"[{f.get('severity')}] {f.get('id')}: {f.get('title')}{where}"
