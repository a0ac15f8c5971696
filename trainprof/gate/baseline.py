"""The baseline gate: samples/s against a stored report's, like with like, minus CPU contention."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from trainprof.compare.settings import LABELS, LIKE_WITH_LIKE, differences
from trainprof.compare.windows import Window, comparable_rates, spread
from trainprof.gate.result import GateOptions, GateResult
from trainprof.gate.thresholds import no_steady

# The baseline gate forgives a drop that CPU contention explains only when the main thread
# waited for a CPU at least this share of the time: below it the wait explains little.
CONTENDED = 0.05


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
        return GateResult(name, "not measured", "—", limit, no_steady(report))
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
