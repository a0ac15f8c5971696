"""The gates of ``trainprof ci``: each judges one thing about a finished run's report.

Pure: a report dict (and the baseline's) in, verdicts out. A gate that cannot judge says why:
``not measured`` (the run has no such number: no GPU, no DataLoader, no steady state) or ``not
comparable`` (the baseline ran with another batch size, world size, device or precision). Both
fail the build like a miss does: a gate the user asked for never passes silently.
"""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from trainprof.analysis.metrics import MIN_STEADY_S
from trainprof.compare.settings import LABELS, LIKE_WITH_LIKE, differences
from trainprof.compare.windows import Spread, Window, comparable_rates, rate, spread
from trainprof.units import fmt_bytes, plural

Status = Literal["pass", "fail", "not measured", "not comparable"]
SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2}

EXIT_PASS = 0  # every gate passed
EXIT_GATE = 1  # a gate failed (or could not judge)
EXIT_USAGE = 2  # bad input (TrainprofError)
EXIT_JOB = 3  # the job crashed or hung
# The baseline gate forgives a drop that CPU contention explains only when the main thread
# waited for a CPU at least this share of the time: below it the wait explains little.
CONTENDED = 0.05


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


def evaluate(report: dict[str, Any], windows: Sequence[Window], opts: GateOptions) -> Verdict:
    """Every gate the options ask for, in the order the table shows them."""
    job = job_gate(report)
    gates = [job, findings_gate(report, opts)]
    throughput = rate(report, windows, "samples_per_s")  # the windows' median, else the summary
    if opts.min_samples_per_s is not None:
        gate = samples_gate(report, throughput, opts.min_samples_per_s)
        gates.append(dataclasses.replace(gate, details=window_lines(windows)))
    if opts.max_data_wait is not None:
        gates.append(data_wait_gate(report, opts.max_data_wait))
    if opts.max_step_p95_s is not None:
        gates.append(step_p95_gate(report, opts.max_step_p95_s))
    if opts.max_peak_rss is not None:
        gates.append(peak_rss_gate(report, opts.max_peak_rss))
    if opts.min_gpu_util is not None:
        gates.append(gpu_util_gate(report, opts.min_gpu_util))
    if opts.baseline is not None:
        gate = baseline_gate(report, opts, runner_load(windows), windows)
        gates.append(dataclasses.replace(gate, details=window_lines(windows)))
    return Verdict(tuple(gates), job_failed=job.status != "pass" and _crashed_or_hung(report))


# ---------------------------------------------------------------- outcome


def _crashed_or_hung(report: dict[str, Any]) -> bool:
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


# ---------------------------------------------------------------- thresholds


def _no_steady(report: dict[str, Any]) -> str:
    steps = (report.get("summary") or {}).get("steps") or 0
    return f"not measured: no steady state ({plural(steps, 'step')} recorded)"


def samples_gate(report: dict[str, Any], thr: Spread | None, minimum: float) -> GateResult:
    name, limit = "min-samples-per-s", f">= {minimum:g} samples/s"
    if thr is None:
        why = (
            _no_steady(report)
            if (report.get("summary") or {}).get("steps_per_s") is None
            else (
                "not measured: the batch size was not recorded (no DataLoader batch with a "
                "leading dimension)"
            )
        )
        return GateResult(name, "not measured", "—", limit, why)
    ok = thr.median >= minimum
    return GateResult(
        name,
        "pass" if ok else "fail",
        f"{thr.median:.1f} samples/s",
        limit,
        f"samples/s {thr.describe()} is {'at or above' if ok else 'below'} {minimum:g}",
    )


def data_wait_gate(report: dict[str, Any], maximum: float) -> GateResult:
    name, limit = "max-data-wait", f"<= {maximum:.0%} of step time"
    summary = report.get("summary") or {}
    value = summary.get("data_wait_frac")
    if value is None:
        why = (
            _no_steady(report)
            if summary.get("steps_per_s") is None
            else "not measured: the job iterated no DataLoader"
        )
        return GateResult(name, "not measured", "—", limit, why)
    ok = value <= maximum
    return GateResult(
        name,
        "pass" if ok else "fail",
        f"{value:.0%}",
        limit,
        f"the loop waited for data {value:.1%} of the steady step time "
        f"({'within' if ok else 'more than'} {maximum:.0%})",
    )


def step_p95_gate(report: dict[str, Any], maximum_s: float) -> GateResult:
    name, limit = "max-step-p95", f"<= {_ms(maximum_s)}"
    times = (report.get("summary") or {}).get("step_time_s")
    if not times or times.get("p95") is None:
        return GateResult(name, "not measured", "—", limit, _no_steady(report))
    p95 = float(times["p95"])
    ok = p95 <= maximum_s
    return GateResult(
        name,
        "pass" if ok else "fail",
        _ms(p95),
        limit,
        f"steady step time p95 {_ms(p95)} (p50 {_ms(float(times['p50']))}) is "
        f"{'within' if ok else 'above'} {_ms(maximum_s)}",
    )


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds < 10 else f"{seconds:.1f} s"


def peak_rss_gate(report: dict[str, Any], maximum: int) -> GateResult:
    name, limit = "max-peak-rss", f"<= {fmt_bytes(maximum)}"
    value = (report.get("summary") or {}).get("peak_rss_bytes")
    if value is None:
        return GateResult(
            name, "not measured", "—", limit, "not measured: no host memory sample was taken"
        )
    ok = value <= maximum
    return GateResult(
        name,
        "pass" if ok else "fail",
        fmt_bytes(value),
        limit,
        f"peak RSS of the job and its workers {fmt_bytes(value)} is "
        f"{'within' if ok else 'above'} {fmt_bytes(maximum)}",
    )


def gpu_util_gate(report: dict[str, Any], minimum: float) -> GateResult:
    name, limit = "min-gpu-util", f">= {minimum:g}%"
    value = (report.get("summary") or {}).get("gpu_util_mean")
    if value is None:
        reason = next(
            (
                s.get("reason")
                for s in report.get("skipped") or []
                if s.get("id") == "gpu-underutilized" and "GPU not measured" in str(s.get("reason"))
            ),
            None,
        )
        why = str(reason).removeprefix("GPU not measured: ") if reason else "no GPU sample"
        return GateResult(name, "not measured", "—", limit, f"GPU not measured: {why}")
    ok = value >= minimum
    return GateResult(
        name,
        "pass" if ok else "fail",
        f"{value:.0f}%",
        limit,
        f"mean GPU utilization {value:.1f}% is {'at or above' if ok else 'below'} {minimum:g}%",
    )


# ---------------------------------------------------------------- baseline


def window_lines(windows: Sequence[Window]) -> tuple[str, ...]:
    """One line per measurement window (none for a single window: the summary is it)."""
    if len(windows) < 2:
        return ()
    return tuple(
        f"window {i}: {w.steps} steps in {w.seconds:.2f} s, "
        + (f"{w.samples_per_s:.1f} samples/s" if w.samples_per_s else f"{w.steps_per_s:.1f} it/s")
        + (f"; other processes used {w.other_cpus:.1f} CPUs" if w.other_cpus is not None else "")
        for i, w in enumerate(windows, 1)
    )


def runner_load(windows: Sequence[Window]) -> float | None:
    """CPUs other processes kept busy during the measurement (the median over windows)."""
    loads = [w.other_cpus for w in windows if w.other_cpus is not None]
    return statistics.median(loads) if loads else None


def _baseline_windows(baseline: dict[str, Any]) -> list[Window]:
    stored = (baseline.get("ci") or {}).get("windows") or []
    try:
        return [Window.from_json(w) for w in stored]
    except (KeyError, TypeError, ValueError):
        return []


def baseline_gate(
    report: dict[str, Any],
    opts: GateOptions,
    load: float | None = None,
    windows: Sequence[Window] = (),
) -> GateResult:
    assert opts.baseline is not None
    name = "baseline"
    base_windows = _baseline_windows(opts.baseline)
    rates = comparable_rates(
        (opts.baseline, base_windows), (report, windows), ("the baseline", "this run")
    )
    base, current, measure = rates.a, rates.b, rates.measure
    limit = f"{measure} >= baseline - {opts.tolerance:.0%}"
    base_settings = opts.baseline.get("settings")
    if not isinstance(base_settings, dict):
        return GateResult(
            name,
            "not comparable",
            "—",
            limit,
            f"the baseline {opts.baseline_name or ''} records no settings (it was written by a "
            "trainprof without them), so like cannot be matched with like; store a new one "
            "with `trainprof ci --json PATH`".replace("  ", " "),
        )
    changed = [
        d for d in differences(base_settings, report.get("settings")) if d[0] in LIKE_WITH_LIKE
    ]
    if changed:
        what = "; ".join(f"{LABELS[k]} {_v(b)} → {_v(c)}" for k, b, c in changed)
        return GateResult(
            name,
            "not comparable",
            "—",
            limit,
            f"not comparable with the baseline: {what}. {measure} is only compared like with "
            "like; store a new baseline for the new setting",
        )
    if rates.unlike:
        return GateResult(name, "not measured", "—", limit, f"not measured: {rates.unlike}")
    if base is None:
        return GateResult(
            name, "not measured", "—", limit, f"not measured: the baseline has no {measure}"
        )
    if current is None:
        return GateResult(name, "not measured", "—", limit, _no_steady(report))
    change = current.median / base.median - 1
    ok = change >= -opts.tolerance
    verb = "within" if ok else "more than"
    busy = ""
    base_load = runner_load(base_windows)
    if load is not None and not ok:
        then = f"; in the baseline {base_load:.1f}" if base_load is not None else ""
        busy = (
            f"; other processes (trainprof's samplers among them) kept {load:.1f} CPUs of "
            f"this machine busy meanwhile{then}: a busy shared runner slows a CPU job too"
        )
    message = (
        f"{measure} {current.describe()} vs the baseline's {base.describe()}: {change:+.1%}, "
        f"{verb} the {opts.tolerance:.0%} tolerance{busy}"
    )
    contention = None if ok else _contention(windows, base_windows, opts.tolerance)
    if contention is not None:
        excused, why = contention
        return GateResult(
            name, "pass" if excused else "fail", f"{change:+.0%}", limit, f"{message}. {why}"
        )
    return GateResult(name, "pass" if ok else "fail", f"{change:+.0%}", limit, message)


def _contention(
    current: Sequence[Window], base: Sequence[Window], tolerance: float
) -> tuple[bool, str] | None:
    """A drop in samples/s while the job's main thread waited for a CPU a sizable share of the
    time: (True, why) when, with that wait taken out of both runs, the throughput is within the
    tolerance (the runner's load, not the change); (False, why) when the drop stays (a real
    regression shows with the wait taken out too). None when the wait was not measured or was
    small."""
    now = spread([w.uncontended_samples_per_s for w in current])
    then = spread([w.uncontended_samples_per_s for w in base])
    waited = [w.cpu_wait_s / w.seconds for w in current if w.cpu_wait_s is not None]
    if now is None or then is None or not waited:
        return None
    share = statistics.median(waited)
    if share < CONTENDED:
        return None
    change = now.median / then.median - 1
    without = (
        f"the main thread waited for a CPU {share:.0%} of the time (schedstat); without those "
        f"waits samples/s is {now.describe()} vs the baseline's {then.describe()}: {change:+.1%}"
    )
    if change >= -tolerance:
        return True, (
            f"Passed for CPU contention: {without}, within the tolerance. The runner was busy; "
            "the job itself did not slow down"
        )
    return False, f"Not the runner's load alone: {without}, still more than the tolerance"


def _v(value: Any) -> str:
    return "not recorded" if value is None else str(value)


# ---------------------------------------------------------------- option parsing

_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([kmgt]?)(i?)b?\s*$", re.IGNORECASE)
_POWER = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}


def parse_size(text: str) -> int | None:
    """``8GB`` (10^9), ``8GiB`` (2^30), ``512M``, ``1.5g``, ``1000000`` (bytes); None if not a size."""
    m = _SIZE.match(text)
    if not m:
        return None
    number, unit, binary = float(m.group(1)), m.group(2).lower(), bool(m.group(3))
    if binary and not unit:
        return None
    return int(number * (1024 if binary else 1000) ** _POWER[unit])
