"""Usable CPUs: the number to size num_workers and thread pools by.

`os.cpu_count()` counts the host's cores; the affinity mask (taskset, cpusets) and the cgroup
CPU quota (docker --cpus, Kubernetes limits) can allow far fewer. torch, OpenMP and most
"workers = cpu_count()" heuristics then oversubscribe, and a quota throttles the whole job.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from trainprof.doctor.base import CheckResult, result
from trainprof.doctor.cgroup import Throttling, quota_stat_file, read_throttling

AREA = "cpu"
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass(frozen=True)
class CpuInputs:
    cpu_count: int | None
    affinity: int | None
    quota: float | None  # CPUs allowed by the cgroup quota, None = no quota
    quota_source: str | None
    workers: int | None = None  # --workers, when given
    throttling: Throttling | None = None  # the quota's counters since its cgroup was made


@dataclass(frozen=True)
class ThreadInputs:
    usable: int
    env_threads: dict[str, str]  # OMP_NUM_THREADS / MKL_NUM_THREADS as set (allowlisted)
    torch_threads: int | None  # torch.get_num_threads() in a fresh interpreter
    workers: int | None = None


# Without --workers, every doctor row that depends on num_workers (shm, open files) assumes the
# count the cpu row recommends, so one output never assumes three different numbers.
ASSUMED_WORKERS_NOTE = "num_workers = usable CPUs - 1, the cpu row's advice"


def suggested_workers(usable: int) -> int:
    """num_workers for ``usable`` CPUs: one core stays with the training loop."""
    return max(usable - 1, 1)


def usable_cpus(inp: CpuInputs) -> int:
    """min(cpu_count, affinity, ceil(quota)), at least 1."""
    candidates = [n for n in (inp.cpu_count, inp.affinity) if n]
    if inp.quota is not None:
        candidates.append(max(1, math.ceil(inp.quota)))
    return max(1, min(candidates)) if candidates else 1


def check_cpu(inp: CpuInputs) -> CheckResult:
    """Warn when a quota or affinity hides cores, or --workers exceeds the usable CPUs."""
    usable = usable_cpus(inp)
    quota = "none" if inp.quota is None else f"{inp.quota:g} CPUs ({inp.quota_source})"
    evidence = [
        f"os.cpu_count() {inp.cpu_count}, affinity {inp.affinity}, cgroup quota {quota}",
        f"usable CPUs {usable}: size num_workers to at most {suggested_workers(usable)} "
        "(one core stays with the training loop)",
    ]
    th = inp.throttling
    if inp.quota is not None and th is not None and th.periods > 0:
        # what the quota has done to this container so far (a job's own: `trainprof run`)
        evidence.append(
            f"the quota has throttled this cgroup in {th.throttled / th.periods:.0%} of its "
            f"{th.periods} periods since it was made ({th.throttled_s:.1f} s stopped)"
        )
    problems: list[str] = []
    fixes: list[str] = []
    if inp.quota is not None and inp.cpu_count and inp.quota < inp.cpu_count:
        problems.append(f"cgroup quota allows {inp.quota:g} of {inp.cpu_count} CPUs")
        fixes.append(
            f"size from the quota, not os.cpu_count(): DataLoader(num_workers={max(usable - 1, 1)}), "
            f"torch.set_num_threads({usable})"
        )
    elif inp.affinity and inp.cpu_count and inp.affinity < inp.cpu_count:
        evidence.append(f"affinity mask limits this process to {inp.affinity} CPUs")
        fixes.append("size from len(os.sched_getaffinity(0)), not os.cpu_count()")
    if inp.workers is not None and inp.workers > usable:
        problems.append(f"--workers {inp.workers} > {usable} usable CPUs")
        fixes.append(f"DataLoader(num_workers={max(usable - 1, 1)}) or give the job more CPUs")
    if problems:
        return result(AREA, "warn", "cpu-quota", "; ".join(problems), evidence, fixes)
    return result(AREA, "ok", "cpu-quota", f"{usable} usable CPUs", evidence)


def check_threads(inp: ThreadInputs) -> CheckResult:
    """Warn when a thread pool is larger than the CPUs the job can use."""
    evidence = [f"usable CPUs {inp.usable}"]
    problems: list[str] = []
    for name in THREAD_VARS:
        raw = inp.env_threads.get(name)
        if raw is None:
            continue
        evidence.append(f"{name}={raw}")
        try:
            n = int(raw)
        except ValueError:
            problems.append(f"{name}={raw!r} is not a number (ignored by OpenMP/MKL)")
            continue
        if n > inp.usable:
            problems.append(f"{name}={n} > {inp.usable} usable CPUs")
    if inp.torch_threads is not None:
        evidence.append(f"torch.get_num_threads() {inp.torch_threads} in a fresh interpreter")
        if inp.torch_threads > inp.usable:
            problems.append(f"torch uses {inp.torch_threads} threads on {inp.usable} usable CPUs")
    else:
        evidence.append("torch.get_num_threads(): unknown (torch not importable)")
    if inp.workers and "OMP_NUM_THREADS" not in inp.env_threads:
        evidence.append(
            "OMP_NUM_THREADS unset: numpy/OpenCV inside each worker may start one thread per core"
        )
    if problems:
        return result(
            AREA,
            "warn",
            "thread-oversubscription",
            "; ".join(problems),
            [*evidence, "threads beyond the usable CPUs time-slice each other and the workers"],
            (
                f"export OMP_NUM_THREADS={inp.usable}  (or torch.set_num_threads({inp.usable}) "
                "at start-up)",
            ),
        )
    return result(
        AREA, "ok", "thread-oversubscription", "thread pools fit the usable CPUs", evidence
    )


def usable_cpu_count(pid: int = 0) -> int:
    """The usable CPUs of process ``pid`` (0: this one), affinity and cgroup quota counted. The
    one count `trainprof doctor` and the run report (run.json ``usable_cpus``, the job's) give."""
    from trainprof.doctor.cgroup import limits_of

    limits = limits_of(pid or "self")
    return usable_cpus(gather_cpu(limits.cpu_quota, limits.cpu_source, pid=pid))


def gather_cpu(
    quota: float | None, quota_source: str | None, workers: int | None = None, pid: int = 0
) -> CpuInputs:
    """Core count and the affinity of ``pid`` (0: this process) from the OS; the quota comes
    from the cgroup gatherer."""
    try:
        affinity: int | None = len(os.sched_getaffinity(pid))
    except (AttributeError, OSError):  # not on Linux
        affinity = None
    stat = quota_stat_file(quota, quota_source)
    throttling = read_throttling(stat) if stat is not None else None
    return CpuInputs(os.cpu_count(), affinity, quota, quota_source, workers, throttling)
