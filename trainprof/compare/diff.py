"""Two reports side by side: throughput with its spread, the verdict, the load each run
measured, findings that appeared or disappeared, and the settings that differ. Pure: loaded
reports and windows in."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from trainprof.compare.settings import differences
from trainprof.compare.windows import (
    Rates,
    Spread,
    Window,
    comparable_rates,
    rate,
    without_cpu_waits,
)

NO_SPREAD_NOISE = 0.05  # the change called noise when a side's spread was not measured
# Two runs had very different load when the main thread's wait for a CPU differs by this share
# of the steady time, or other processes' CPUs by this many.
WAIT_APART = 0.10
OTHERS_APART = 0.5

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

    @property
    def load(self) -> Load:
        return load_of(self.report, self.windows)


@dataclass(frozen=True)
class Load:
    """The load a run measured over its steady window; None: not measured."""

    waited: float | None  # share of it the main thread waited, runnable, for a CPU
    others: float | None  # CPUs the machine's other processes used, on average
    usable: int | None  # CPUs the job could use

    def describe(self) -> str:
        if self.waited is None and self.others is None:
            return "not measured"
        parts = []
        if self.waited is not None:
            parts.append(f"waited for a CPU {self.waited:.0%}")
        if self.others is not None:
            parts.append(f"other processes {self.others:.1f} CPUs")
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {"waited": self.waited, "others_cpus": self.others, "usable_cpus": self.usable}


def load_of(report: dict[str, Any], windows: Sequence[Window]) -> Load:
    """The report's ``summary.cpu_load``; where it has none (a report of an older trainprof),
    the windows' waits and other processes' CPUs."""
    got = (report.get("summary") or {}).get("cpu_load")
    settings = report.get("settings") or {}
    usable = settings.get("usable_cpus") if isinstance(settings, dict) else None
    usable = usable if isinstance(usable, int) and not isinstance(usable, bool) else None
    if isinstance(got, dict):
        waited, others = _num(got.get("waited")), _num(got.get("others_cpus"))
        return Load(waited, others, usable)
    waits = [w.cpu_wait_s / w.seconds for w in windows if w.cpu_wait_s is not None]
    others_w = [w.other_cpus for w in windows if w.other_cpus is not None]
    return Load(
        statistics.median(waits) if waits else None,
        statistics.median(others_w) if others_w else None,
        usable,
    )


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


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
    load_note: str | None = None  # the two runs had very different load

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
            "load_note": self.load_note,
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
        "load": side.load.to_json(),
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
        settings=_settings(a, b),
        batch_note=_batch_note(a, b),
        load_note=_load_note(a, b),
    )


def _settings(a: Side, b: Side) -> tuple[tuple[str, Any, Any], ...]:
    """The settings that differ; the mean samples per step not, where the batch size and the
    batches per step are the same (an epoch's short last batch moves the mean: 63.83 vs
    63.73 for two runs of batch 64)."""
    if not (a.settings and b.settings):
        return ()
    same_work = _work(a.settings) is not None and _work(a.settings) == _work(b.settings)
    return tuple(
        d
        for d in differences(a.settings, b.settings)
        if not (same_work and d[0] == "samples_per_step")
    )


def _work(settings: dict[str, Any]) -> tuple[Any, Any] | None:
    """The configured work of a step: (batch size, batches per step); None: not recorded."""
    batch = settings.get("batch_size")
    return None if batch is None else (batch, settings.get("batches_per_step") or 1)


def _load_note(a: Side, b: Side) -> str | None:
    """Where the two runs measured very different load: each one's, and the change with the
    main thread's waits for a CPU taken out (as `trainprof ci --baseline` does)."""
    la, lb = a.load, b.load
    apart = (
        la.waited is not None and lb.waited is not None and abs(la.waited - lb.waited) >= WAIT_APART
    ) or (
        la.others is not None
        and lb.others is not None
        and abs(la.others - lb.others) >= OTHERS_APART
    )
    if not apart:
        return None
    note = f"the runs had very different load: A's main thread {la.describe()}, B's {lb.describe()}"
    now, then = without_cpu_waits(b.windows), without_cpu_waits(a.windows)
    if now is not None and then is not None:
        note += (
            f"; without those waits samples/s is {then.describe()} (A) vs {now.describe()} (B): "
            f"{now.median / then.median - 1:+.1%}"
        )
    else:
        note += "; the change is the machine's load as much as the code's"
    return note


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
    per_a, per_b = _per_step(sa), _per_step(sb)
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


def _per_step(settings: dict[str, Any]) -> float | None:
    """Samples a step carries as configured: the batch size (the most common one) times the
    batches per step; the mean samples per step where no batch size was recorded."""
    work = _work(settings)
    if work is not None and isinstance(work[0], int) and isinstance(work[1], int):
        return float(work[0] * work[1])
    per = settings.get("samples_per_step")
    return float(per) if isinstance(per, (int, float)) else None


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
