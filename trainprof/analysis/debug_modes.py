"""torch's debug switches as the probe read them (probe/debug_modes.py): anomaly detection and
the profiler over the run, where anomaly detection was turned on, and CUDA_LAUNCH_BLOCKING.

Pure: reads a process's info records. Times are monotonic seconds, as every window of the
analysis.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from trainprof.analysis.attribution import recorded_caller
from trainprof.store.events import ProcessLog
from trainprof.store.stacks import Frame


@dataclass(frozen=True)
class Reading:
    t: float
    anomaly: bool
    check_nan: bool
    profiler: bool = False  # a profiler recording (runs recorded before it was read: False)


@dataclass(frozen=True)
class DebugModes:
    # the switches at the first optimizer step, then at each change, in time order
    readings: tuple[Reading, ...]
    anomaly_at: Frame | None  # the user's line that turned anomaly detection on
    launch_blocking: str | None  # CUDA_LAUNCH_BLOCKING as the job had it (None: unset)
    profiler_at: Frame | None = None  # the user's line that started a profiler recording

    def anomaly_share(self, t0: float, t1: float) -> float:
        """The share of [t0, t1] anomaly detection was on."""
        return self._share(t0, t1, lambda r: r.anomaly)

    def profiler_share(self, t0: float, t1: float) -> float:
        """The share of [t0, t1] a profiler was recording."""
        return self._share(t0, t1, lambda r: r.profiler)

    def _share(self, t0: float, t1: float, on: Callable[[Reading], bool]) -> float:
        """A reading holds until the next; the first holds from t0 (the first step, where it
        was read, is before the steady window)."""
        if t1 <= t0 or not self.readings:
            return 0.0
        total = 0.0
        for i, r in enumerate(self.readings):
            start = t0 if i == 0 else max(t0, r.t)
            end = min(t1, self.readings[i + 1].t) if i + 1 < len(self.readings) else t1
            if on(r) and end > start:
                total += end - start
        return total / (t1 - t0)

    def checks_nan(self) -> bool:
        """Anomaly detection checked gradients for NaN whenever it was on."""
        return any(r.anomaly and r.check_nan for r in self.readings)

    @property
    def launch_blocking_on(self) -> bool:
        """CUDA_LAUNCH_BLOCKING as CUDA reads it: any value but 0 (and unset) blocks."""
        return self.launch_blocking is not None and self.launch_blocking.strip() not in ("", "0")


def how_long(share: float) -> str:
    """A switch's share of the steady run, as the findings say it."""
    return "all of the steady run" if share > 0.99 else f"{share:.0%} of the steady run"


def read(log: ProcessLog) -> DebugModes | None:
    """The process's debug switches; None where the probe read none (no optimizer step, the
    part switched off, a run recorded before the probe read them)."""
    readings: list[Reading] = []
    launch_blocking: str | None = None
    for info in log.infos:
        d, t = info.get("debug"), info.get("t")
        if not isinstance(d, dict) or not isinstance(t, int):
            continue
        readings.append(
            Reading(
                log.t0 + t / 1e6,
                d.get("anomaly") is True,
                d.get("check_nan") is True,
                d.get("profiler") is True,
            )
        )
        if isinstance(d.get("launch_blocking"), str):
            launch_blocking = d["launch_blocking"]
    if not readings:
        return None
    return DebugModes(
        tuple(sorted(readings, key=lambda r: r.t)),
        recorded_caller(log.infos, "anomaly_callers"),
        launch_blocking,
        recorded_caller(log.infos, "profiler_callers"),
    )
