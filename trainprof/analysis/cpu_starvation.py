"""How much the training loop's own thread waited for a CPU, and what took the CPUs: a cgroup
quota that throttled the job, the job's own threads beyond its CPUs, or other processes.

The kernel counts, per thread, the time it was runnable but not running (schedstat's run
delay); the host sampler reads it for each process's main thread, and the quota's counters
(``cpu.stat``) of the job's cgroup where it has one. A container that shows the host's cores
(``os.cpu_count()`` 64) under a 4-CPU quota is the common case: torch starts an intra-op thread
per core it sees, DataLoader workers are sized to the same count, and the quota stops them all
for the rest of each 100 ms period once it is spent.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from trainprof.analysis.stats import finite, mean
from trainprof.analysis.worker_load import runq_share
from trainprof.store.session import Samples


@dataclass(frozen=True)
class CpuStarvation:
    """The steady window's readings; None where not read."""

    runq: float  # share of the window the main thread waited, runnable, for a CPU
    job_cpus: float | None  # CPUs the job's processes used, on average
    machine_cpus: float | None  # CPUs the whole machine used, on average
    own_cpus: float | None  # CPUs trainprof's own processes used (the sampler, py-spy)
    machine_total: int | None  # the machine's logical CPUs
    usable: int | None  # CPUs the job may use (affinity, the quota)
    quota: float | None  # CPUs its cgroup quota allows
    throttled: float | None  # share of the quota's periods in the window it was throttled in
    throttled_s: float | None  # seconds its threads were stopped by the quota in the window

    @property
    def others_cpus(self) -> float | None:
        """CPUs the machine's other processes used, on average; trainprof's own (its sampler,
        py-spy) are not other processes. None: not measured."""
        if self.machine_cpus is None or self.job_cpus is None:
            return None
        return max(0.0, self.machine_cpus - self.job_cpus - (self.own_cpus or 0.0))

    @property
    def others_on_its_cpus(self) -> float | None:
        """CPUs other processes surely took from the CPUs the job may use: all they used, less
        the machine's CPUs the job may not use (a job pinned to 1 of 2 CPUs shares its CPU with
        at most what they used beyond the other one). None: not measured."""
        others = self.others_cpus
        if others is None or not self.usable or not self.machine_total:
            return others
        return max(0.0, others - max(0, self.machine_total - self.usable))

    def to_json(self) -> dict[str, float | int | None]:
        """The report's ``summary.cpu_load``: what `compare` reads each run's load from."""

        def r(v: float | None) -> float | None:
            return None if v is None else round(v, 3)

        return {
            "waited": round(self.runq, 4),
            "job_cpus": r(self.job_cpus),
            "others_cpus": r(self.others_cpus),
            "trainprof_cpus": r(self.own_cpus),
            "usable_cpus": self.usable,
            "machine_cpus": self.machine_total,
        }

    def got(self) -> str:
        """``the job got 0.6 of its 2 CPUs: other processes used 1.4 of the machine's 2``."""
        usable = f"{self.usable} CPU{'' if self.usable == 1 else 's'}" if self.usable else "CPUs"
        text = f"the job got {self.job_cpus or 0.0:.1f} of its {usable}"
        others = self.others_cpus
        if others is not None and self.machine_total:
            text += f": other processes used {others:.1f} of the machine's {self.machine_total}"
        return text


def cpu_starvation(
    samples: Samples,
    main_pid: int | None,
    window: tuple[float, float] | None,
    usable: int | None,
    machine_total: int | None,
) -> CpuStarvation | None:
    """The readings over ``window`` (the steady state); None without a run-queue reading of
    the main process there (off Linux, or a window shorter than two sampler ticks)."""
    series = samples.procs.get(main_pid) if main_pid is not None else None
    if series is None or window is None:
        return None
    inside = [i for i, t in enumerate(series.t) if window[0] <= t <= window[1]]
    runq = runq_share([(series.t[i], series.rq_wait[i]) for i in inside])
    if runq is None:
        return None
    ticks = [i for i, t in enumerate(samples.t) if window[0] <= t <= window[1]]
    job = finite(samples.tree_cpu[i] for i in ticks)
    machine = finite(samples.machine_cpu[i] for i in ticks)
    own = finite(samples.self_cpu[i] for i in ticks)
    return CpuStarvation(
        runq=runq,
        job_cpus=mean(job) / 100.0 if job else None,
        machine_cpus=mean(machine) / 100.0 * machine_total if machine and machine_total else None,
        own_cpus=mean(own) / 100.0 if own else None,
        machine_total=machine_total,
        usable=usable,
        quota=samples.cpu_quota,
        throttled=_delta_ratio(samples, ticks),
        throttled_s=_delta(samples.quota_throttled_s, ticks),
    )


def _delta(column: Sequence[float], ticks: list[int]) -> float | None:
    """The rise of a cumulative column between its first and last reading at ``ticks``."""
    values = [(i, v) for i in ticks if not math.isnan(v := column[i])]
    if len(values) < 2:
        return None
    return max(0.0, values[-1][1] - values[0][1])


def _delta_ratio(samples: Samples, ticks: list[int]) -> float | None:
    """Throttled periods over periods between the window's first and last quota reading."""
    periods = _delta(samples.quota_periods, ticks)
    throttled = _delta(samples.quota_throttled, ticks)
    if periods is None or throttled is None or periods <= 0:
        return None
    return min(1.0, throttled / periods)
