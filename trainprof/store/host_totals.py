"""Three run-wide totals of the host samples: the CPUs the job could use, what trainprof's own
processes cost, and the job's peak memory.

Usable CPUs: the training process's own affinity (taskset, cpusets), as the sampler last read
it, and its cgroup's CPU quota; run.json's count, read from the job as it started, where the
sampler read no affinity of it. Never trainprof's own: a job started as ``taskset -c 0 python
train.py`` under ``trainprof run`` has 1 CPU whatever trainprof has.

Own cost: the CPU seconds trainprof's processes used while the job ran (the process that
sampled, the runner or attach, with its samplers, live view and output copying; and its helpers,
py-spy), from the sampler's cumulative readings, as a share of the CPUs the job could use over
the same span and of that span (one CPU's worth). The probe's cost inside the job is not
measured in a run: it is said, never 0.

Peak memory: the highest sum of the job's processes' PSS (a page shared by N processes counts
1/N in each, so pages a forked DataLoader worker shares with its parent count once), where every
process had one; else the highest sum of their RSS, which counts each shared page once per
process (N forked workers: up to N + 1 times).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from trainprof.store.session import Samples

PROBE_NOT_MEASURED = "not measured: the probe does not time its own hooks in a run"
NO_OWN_COST = "not measured: fewer than two host samples carried trainprof's own CPU readings"


@dataclass(frozen=True)
class OwnCost:
    """trainprof's own CPU over the sampled span of the job."""

    supervisor_s: float  # the runner (or attach): samplers, live view, output copying
    helpers_s: float  # py-spy
    span_s: float  # the host samples' first to last tick
    usable_cpus: int | None  # CPUs the job could use (affinity, quota); None: unknown

    @property
    def cpu_s(self) -> float:
        return self.supervisor_s + self.helpers_s

    @property
    def wall_share(self) -> float:
        """CPU seconds per second of the span: the share of one CPU, over the job's time."""
        return self.cpu_s / self.span_s

    @property
    def machine_share(self) -> float | None:
        """The share of the CPU the machine gave the job over the span."""
        return self.cpu_s / (self.span_s * self.usable_cpus) if self.usable_cpus else None

    def to_json(self) -> dict[str, Any]:
        return {
            "cpu_s": round(self.cpu_s, 3),
            "supervisor_cpu_s": round(self.supervisor_s, 3),
            "helpers_cpu_s": round(self.helpers_s, 3),
            "span_s": round(self.span_s, 3),
            "usable_cpus": self.usable_cpus,
            "machine_share": _round(self.machine_share),
            "wall_share": _round(self.wall_share),
            "probe_in_job": None,
            "not_measured": {"probe_in_job": PROBE_NOT_MEASURED},
        }


def usable_cpus(samples: Samples, pid: int | None, at_start: Any) -> int | None:
    """The CPUs the job's training process ``pid`` could use: its affinity capped by the
    quota; ``at_start`` (run.json's ``usable_cpus``) where its affinity was not read."""
    series = samples.procs.get(pid) if pid is not None else None
    if series is None or series.cpus is None:
        ok = isinstance(at_start, int) and not isinstance(at_start, bool) and at_start > 0
        return at_start if ok else None
    cpus = series.cpus
    if samples.cpu_quota is not None and samples.cpu_quota > 0:
        cpus = min(cpus, max(1, math.ceil(samples.cpu_quota)))
    return max(1, cpus)


def own_cost(samples: Samples, usable_cpus: int | None) -> OwnCost | None:
    """The rise of the cumulative readings from the first tick that has them to the last; None
    where fewer than two ticks have them, or no time passed between."""
    read = [
        (t, a, b)
        for t, a, b in zip(samples.t, samples.own_supervisor_s, samples.own_helpers_s, strict=True)
        if not (math.isnan(t) or math.isnan(a) or math.isnan(b))
    ]
    if len(read) < 2 or read[-1][0] <= read[0][0]:
        return None
    (t0, a0, b0), (t1, a1, b1) = read[0], read[-1]
    cpus = usable_cpus if isinstance(usable_cpus, int) and usable_cpus > 0 else None
    return OwnCost(max(0.0, a1 - a0), max(0.0, b1 - b0), t1 - t0, cpus)


def own_cost_json(cost: OwnCost | None, why: str) -> dict[str, Any]:
    """The report's ``summary.trainprof_cost``: every field null where not measured, and why."""
    if cost is not None:
        return cost.to_json()
    return {
        "cpu_s": None,
        "supervisor_cpu_s": None,
        "helpers_cpu_s": None,
        "span_s": None,
        "usable_cpus": None,
        "machine_share": None,
        "wall_share": None,
        "probe_in_job": None,
        "not_measured": {"cpu_s": why, "probe_in_job": PROBE_NOT_MEASURED},
    }


@dataclass(frozen=True)
class PeakMemory:
    bytes: int  # the peak the basis gives
    basis: str  # "pss": every process's PSS summed; "rss": their RSS summed
    rss_sum_bytes: int | None  # the highest sum of RSS, for comparison

    def to_json(self) -> dict[str, Any]:
        return {"bytes": self.bytes, "basis": self.basis, "rss_sum_bytes": self.rss_sum_bytes}


def peak_memory(samples: Samples) -> PeakMemory | None:
    """The job's peak memory, on PSS where a tick had every process's, else on RSS; None
    without a host sample."""
    rss = [v for v in samples.tree_rss if not math.isnan(v)]
    pss = [v for v in samples.tree_pss if not math.isnan(v)]
    rss_peak = int(max(rss)) if rss else None
    if pss:
        return PeakMemory(int(max(pss)), "pss", rss_peak)
    if rss_peak is not None:
        return PeakMemory(rss_peak, "rss", rss_peak)
    return None


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 4)
