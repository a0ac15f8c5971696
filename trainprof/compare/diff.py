"""Two reports side by side: throughput with its spread, the verdict, findings that appeared
or disappeared, and the settings that differ. Pure: loaded reports and windows in."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from trainprof.compare.settings import differences
from trainprof.compare.windows import Rates, Spread, Window, comparable_rates, rate

NO_SPREAD_NOISE = 0.05  # the change called noise when a side's spread was not measured

Trend = Literal["faster", "slower", "within noise", "not measured"]


@dataclass(frozen=True)
class Side:
    label: str  # the path as the user gave it
    report: dict[str, Any]
    windows: tuple[Window, ...]  # from its run directory, or stored by `trainprof ci`

    @property
    def samples(self) -> Spread | None:
        return rate(self.report, self.windows, "samples_per_s")

    @property
    def steps(self) -> Spread | None:
        return rate(self.report, self.windows, "steps_per_s")

    @property
    def settings(self) -> dict[str, Any] | None:
        s = self.report.get("settings")
        return s if isinstance(s, dict) else None

    def finding_ids(self) -> list[str]:
        return [str(f.get("id")) for f in self.report.get("findings") or []]


@dataclass(frozen=True)
class Comparison:
    a: Side
    b: Side
    trend: Trend
    measure: str | None  # what the verdict compares: "samples/s", "it/s", None if neither
    change: float | None  # B's measure over A's, minus 1
    why: str  # how the verdict was reached (the noise it allowed for)
    appeared: tuple[str, ...]
    disappeared: tuple[str, ...]
    settings: tuple[tuple[str, Any, Any], ...]  # (key, A's, B's) for each that differs
    batch_note: str | None  # it/s vs samples/s across a changed batch size

    def to_json(self) -> dict[str, Any]:
        """``trainprof compare --json``: what the console shows, as data (schema in
        docs/REPORT.md); a measure not measured is null, never 0."""
        return {
            "a": _side_json(self.a),
            "b": _side_json(self.b),
            "verdict": {
                "trend": self.trend,
                "measure": self.measure,
                "change": self.change,
                "samples_per_s_change": self.change if self.measure == "samples/s" else None,
                "why": self.why,
            },
            "findings": {"appeared": list(self.appeared), "disappeared": list(self.disappeared)},
            "settings_differ": [{"key": k, "a": va, "b": vb} for k, va, vb in self.settings],
            "batch_note": self.batch_note,
        }


def _side_json(side: Side) -> dict[str, Any]:
    def spread_json(s: Spread | None) -> dict[str, Any] | None:
        if s is None:
            return None
        return {"median": s.median, "low": s.low, "high": s.high, "windows": s.count}

    summary = side.report.get("summary") or {}
    return {
        "path": side.label,
        "samples_per_s": spread_json(side.samples),
        "steps_per_s": spread_json(side.steps),
        "step_time_s": summary.get("step_time_s"),
        "findings": side.finding_ids(),
        "settings": side.settings,
    }


def compare(a: Side, b: Side) -> Comparison:
    rates = comparable_rates((a.report, a.windows), (b.report, b.windows), ("A", "B"))
    trend, change, why = _trend(rates)
    attached = [n for n, side in (("A", a), ("B", b)) if _is_attach(side.report)]
    if trend == "not measured" and attached:
        runs = "is an attach run" if len(attached) == 1 else "are attach runs"
        why = (
            f"{' and '.join(attached)} {runs}, with no measured steps (stack samples from "
            "outside); compare reports of `trainprof run` or `trainprof ci`"
        )
    ids_a, ids_b = a.finding_ids(), b.finding_ids()
    return Comparison(
        a,
        b,
        trend,
        None if rates.unlike else rates.measure,
        change,
        why,
        appeared=tuple(i for i in ids_b if i not in ids_a),
        disappeared=tuple(i for i in ids_a if i not in ids_b),
        settings=tuple(differences(a.settings, b.settings)) if a.settings and b.settings else (),
        batch_note=_batch_note(a, b),
    )


def _is_attach(report: dict[str, Any]) -> bool:
    return isinstance((report.get("run") or {}).get("attach"), dict)


def _trend(rates: Rates) -> tuple[Trend, float | None, str]:
    a, b = rates.a, rates.b
    if rates.unlike:
        return "not measured", None, rates.unlike
    if a is None or b is None:
        which = "A" if a is None else "B"
        why = (
            "no steady state, or no batches" if rates.measure == "samples/s" else "no steady state"
        )
        return "not measured", None, f"{which} has no {rates.measure} ({why})"
    change = b.median / a.median - 1
    if a.count > 1 and b.count > 1:
        if b.low <= a.high and a.low <= b.high:
            return "within noise", change, "the two runs' window ranges overlap"
        faster = change > 0
        return (
            "faster" if faster else "slower",
            change,
            f"{'B' if faster else 'A'}'s slowest window beats {'A' if faster else 'B'}'s fastest",
        )
    if abs(change) <= NO_SPREAD_NOISE:
        return (
            "within noise",
            change,
            f"spread not measured (a report without its run directory): a change within "
            f"±{NO_SPREAD_NOISE:.0%} is called noise",
        )
    return (
        "faster" if change > 0 else "slower",
        change,
        f"spread not measured: a change beyond ±{NO_SPREAD_NOISE:.0%} is called real",
    )


def _batch_note(a: Side, b: Side) -> str | None:
    """Why it/s misleads when the work per step changed (the user who 'made it slower' by
    raising the batch size sees it/s fall and samples/s rise)."""
    sa, sb = a.settings or {}, b.settings or {}
    per_a, per_b = sa.get("samples_per_step"), sb.get("samples_per_step")
    if per_a is None or per_b is None or per_a == per_b:
        return None
    its_a, its_b = a.steps, b.steps
    its = ""
    if its_a is not None and its_b is not None:
        its = f"it/s went {its_b.median / its_a.median - 1:+.0%}, but "
    # the same batch size over more batches per step is gradient accumulation, not a batch size
    ka, kb = sa.get("batches_per_step"), sb.get("batches_per_step")
    what = (
        "gradient accumulation steps"
        if ka is not None
        and kb is not None
        and ka != kb
        and sa.get("batch_size") == sb.get("batch_size")
        else "batch sizes"
    )
    return (
        f"{its}a step of B carries {per_b:g} samples and a step of A {per_a:g}: it/s is not "
        f"comparable across {what}; samples/s is, and the verdict uses it"
    )


def describe_spread(s: Spread | None, fmt: str = "{:.1f}") -> str:
    return "not measured" if s is None else s.describe(fmt)


def step_time(report: dict[str, Any]) -> str:
    t = (report.get("summary") or {}).get("step_time_s")
    if not t:
        return "not measured"
    return (
        f"p50 {t['p50'] * 1e3:.1f} ms · p95 {t['p95'] * 1e3:.1f} ms · max {t['max'] * 1e3:.1f} ms"
    )


def window_step_range(windows: Sequence[Window]) -> str | None:
    """The range of the windows' median step times."""
    if len(windows) < 2:
        return None
    p50s = [w.p50_step_s * 1e3 for w in windows]
    return f"window p50s {min(p50s):.1f}–{max(p50s):.1f} ms"
