"""Throughput windows: the steady steps of one run split into K consecutive windows.

A CI gate on a shared runner must not trust one number. The steady steps (warm-up excluded, as
the report excludes it) are cut into K consecutive windows that tile the steady span exactly;
each window has its own samples/s, and the gate takes their median and shows their spread.
Windows of one run, rather than K runs: each run pays the job's start-up again (seconds of
imports, a first optimizer, worker start), and a burst of noise on a shared runner (another
job's compile, a GC pause) lands in one window, which the median ignores. A run that is slow
from end to end is slow in every window, so the median still sees it.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import math
import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainprof.store import rundir
from trainprof.store.session import Session
from trainprof.units import plural_of

MIN_WINDOW_STEPS = 5  # a window of fewer steps says more about one step than about throughput


@dataclass(frozen=True)
class Window:
    steps: int
    seconds: float
    samples_per_s: float | None  # None: batch sizes not recorded
    steps_per_s: float
    p50_step_s: float
    # CPUs kept busy by other processes of the machine meanwhile (a shared runner's load);
    # None: fewer than one host sample fell inside the window.
    other_cpus: float | None = None
    # Seconds the main thread waited, runnable, for a CPU during the window (schedstat); None:
    # not read (no host sample around the window, or no /proc).
    cpu_wait_s: float | None = None
    span: tuple[float, float] = (0.0, 0.0)  # monotonic start and end (not stored)

    @property
    def uncontended_samples_per_s(self) -> float | None:
        """samples/s had the main thread never waited for a CPU: the window's time less that
        wait. On a shared runner this is what a change under test, not the load, decides."""
        if self.samples_per_s is None or self.cpu_wait_s is None:
            return None
        busy = self.seconds - self.cpu_wait_s
        return self.samples_per_s * self.seconds / busy if busy > 0 else None

    def to_json(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "seconds": round(self.seconds, 4),
            "samples_per_s": round(self.samples_per_s, 3) if self.samples_per_s else None,
            "steps_per_s": round(self.steps_per_s, 3),
            "p50_step_s": round(self.p50_step_s, 6),
            "other_cpus": round(self.other_cpus, 2) if self.other_cpus is not None else None,
            "cpu_wait_s": round(self.cpu_wait_s, 4) if self.cpu_wait_s is not None else None,
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> Window:
        return Window(
            int(d["steps"]),
            float(d["seconds"]),
            float(d["samples_per_s"]) if d.get("samples_per_s") is not None else None,
            float(d["steps_per_s"]),
            float(d["p50_step_s"]),
            float(d["other_cpus"]) if d.get("other_cpus") is not None else None,
            float(d["cpu_wait_s"]) if d.get("cpu_wait_s") is not None else None,
        )


def step_windows(session: Session, warmup: int, k: int) -> list[Window]:
    """Up to ``k`` consecutive windows of the steady steps (fewer when a window would hold
    fewer than ``MIN_WINDOW_STEPS`` steps); none without a steady state."""
    primary = session.primary
    if primary is None:
        return []
    t: Sequence[int]
    dur: Sequence[int]
    samples: Sequence[int]
    if primary.n_steps:
        t, dur, samples = primary.steps["t"], primary.steps["dur"], primary.steps["samples"]
    else:  # each batch is a step, or else each backward() (as the report counts them)
        t = primary.batches["t"] if len(primary.batches["t"]) else primary.backwards
        samples = primary.batches["batch_size"] if len(primary.batches["t"]) else [-1] * len(t)
        dur = [t[0]] + [t[i] - t[i - 1] for i in range(1, len(t))] if len(t) else []
    out = windows_of(t, dur, samples, max(warmup, 1), k)
    shifted = [
        dataclasses.replace(w, span=(primary.t0 + w.span[0], primary.t0 + w.span[1])) for w in out
    ]
    return with_runner_load(shifted, Path(session.run_dir) / rundir.SAMPLES, primary.pid)


def windows_of(
    t: Sequence[int], dur: Sequence[int], samples: Sequence[int], warmup: int, k: int
) -> list[Window]:
    """Windows of steps ``warmup..n-1``; ``t`` is each step's end and ``dur`` its time, in µs.
    Window j spans from the end of the step before it to the end of its last step, so the
    windows tile the steady span and their samples add up to the report's."""
    steady = len(t) - warmup
    k = min(k, steady // MIN_WINDOW_STEPS)
    if k < 1 or warmup < 1:
        return []
    bounds = [warmup + steady * j // k for j in range(k + 1)]
    out = []
    for a, b in zip(bounds, bounds[1:], strict=False):
        seconds = (t[b - 1] - t[a - 1]) / 1e6
        if seconds <= 0:
            return []
        n = sum(s for s in samples[a:b] if s > 0)
        out.append(
            Window(
                steps=b - a,
                seconds=seconds,
                samples_per_s=n / seconds if n else None,
                steps_per_s=(b - a) / seconds,
                p50_step_s=statistics.median(dur[a:b]) / 1e6,
                span=(t[a - 1] / 1e6, t[b - 1] / 1e6),
            )
        )
    return out


def with_runner_load(
    windows: list[Window], samples_path: Path, pid: int | None = None
) -> list[Window]:
    """Each window with the CPUs other processes used meanwhile (the machine's busy CPUs, from
    psutil's system-wide percent, less the job's own) and the time the main thread ``pid``
    waited for a CPU (its cumulative schedstat wait, read at each host sample, interpolated at
    the window's ends). On a shared runner that load, not the change under test, is often why
    a window is slow."""
    cpus = os.cpu_count() or 1
    rows: list[tuple[float, float]] = []
    waits: list[tuple[float, float]] = []  # (t, the main thread's cumulative wait, s)
    try:
        with open(samples_path, encoding="utf-8") as f:
            for line in f:
                try:
                    row = json.loads(line)
                    procs = row.get("procs") or []
                    job = sum(float(p.get("cpu") or 0.0) for p in procs)
                    rows.append((float(row["t"]), float(row["cpu"]) * cpus / 100 - job / 100))
                    mine = [
                        p for p in procs if p.get("pid") == pid and p.get("rq_wait") is not None
                    ]
                    if mine:
                        waits.append((float(row["t"]), float(mine[0]["rq_wait"])))
                except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
                    continue
    except OSError:
        return windows
    out = []
    for w in windows:
        inside = [v for t, v in rows if w.span[0] <= t <= w.span[1] and math.isfinite(v)]
        load = max(0.0, statistics.mean(inside)) if inside else None
        a, b = _at(waits, w.span[0]), _at(waits, w.span[1])
        wait = min(w.seconds, max(0.0, b - a)) if a is not None and b is not None else None
        out.append(dataclasses.replace(w, other_cpus=load, cpu_wait_s=wait))
    return out


def _at(series: list[tuple[float, float]], t: float) -> float | None:
    """A cumulative counter at time ``t``, linear between the samples around it; before the
    first sample or after the last, that sample's value: the wait is then undercounted, never
    invented (the job's last steps usually end between two samples). None without samples."""
    if not series:
        return None
    i = bisect.bisect_left(series, (t, -math.inf))
    if i < len(series) and series[i][0] == t:
        return series[i][1]
    if i == 0 or i == len(series):
        return series[min(i, len(series) - 1)][1]
    (t0, v0), (t1, v1) = series[i - 1], series[i]
    return v0 + (v1 - v0) * (t - t0) / (t1 - t0) if t1 > t0 else v1


@dataclass(frozen=True)
class Spread:
    """The median of a measure over windows and the range it spanned."""

    median: float
    low: float
    high: float
    count: int

    @property
    def relative(self) -> float:
        """Half the range over the median: ±this much around the median."""
        return (self.high - self.low) / 2 / self.median if self.median else 0.0

    def describe(self, fmt: str = "{:.1f}", unit: str = "") -> str:
        if self.count < 2:
            return f"{fmt.format(self.median)}{unit} (1 window: no spread measured)"
        return (
            f"{fmt.format(self.median)}{unit} (median of {self.count} windows, "
            f"{fmt.format(self.low)}–{fmt.format(self.high)}, ±{self.relative:.0%})"
        )


def rate(report: dict[str, Any], windows: Sequence[Window], key: str) -> Spread | None:
    """``samples_per_s`` or ``steps_per_s`` of a run: the median and range of its windows, or
    with one window the report's whole steady state (no spread measured)."""
    if len(windows) > 1:
        return spread([getattr(w, key) for w in windows])
    value = (report.get("summary") or {}).get(key)
    return Spread(value, value, value, 1) if isinstance(value, (int, float)) else None


def spread(values: Sequence[float | None]) -> Spread | None:
    known = [v for v in values if v is not None]
    if not known:
        return None
    return Spread(statistics.median(known), min(known), max(known), len(known))


@dataclass(frozen=True)
class Rates:
    """Two runs' throughput in the one measure both can be compared by."""

    measure: str  # "samples/s"; "it/s" where neither run has samples/s
    a: Spread | None
    b: Spread | None
    unlike: str | None  # why their it/s do not compare (steps of different kinds), else None


Run = tuple[dict[str, Any], Sequence[Window]]  # a report and its windows


def comparable_rates(a: Run, b: Run, names: tuple[str, str]) -> Rates:
    """samples/s where either run has it. Where neither does (a loop without a DataLoader has
    no batch size), steps per second, but only when both count the same kind of step
    (``summary.unit``): 300 backward passes a second and 300 batches a second are not alike."""
    samples_a, samples_b = rate(*a, "samples_per_s"), rate(*b, "samples_per_s")
    if samples_a is not None or samples_b is not None:
        return Rates("samples/s", samples_a, samples_b, None)
    steps_a, steps_b = rate(*a, "steps_per_s"), rate(*b, "steps_per_s")
    unit_a, unit_b = _unit(a[0]), _unit(b[0])
    if steps_a is None or steps_b is None or unit_a == unit_b:
        return Rates("it/s", steps_a, steps_b, None)
    unlike = (
        f"neither run has samples/s, and their steps differ in kind ({names[0]} counts "
        f"{plural_of(unit_a)}, {names[1]} {plural_of(unit_b)}): their it/s do not compare"
    )
    return Rates("it/s", None, None, unlike)


def _unit(report: dict[str, Any]) -> str:
    unit = (report.get("summary") or {}).get("unit")
    return unit if isinstance(unit, str) else "step"


def without_cpu_waits(windows: Sequence[Window]) -> Spread | None:
    """samples/s over the windows had the main thread never waited for a CPU (each window's
    time less its wait): what a change decides, apart from the machine's load."""
    return spread([w.uncontended_samples_per_s for w in windows])
