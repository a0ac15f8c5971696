"""Usable CPUs: the number to size num_workers and thread pools by.

`os.cpu_count()` counts the host's cores; the affinity mask (taskset, cpusets) and the cgroup
CPU quota (docker --cpus, Kubernetes limits) can allow far fewer. torch, OpenMP and most
"workers = cpu_count()" heuristics then oversubscribe, and a quota throttles the whole job.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from typing import Any

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


LOAD_SAMPLE_S = 0.5  # how long the load is sampled for
OTHERS_MIN = 0.5  # CPUs other processes must take to be a warning (cpu-starved's bar)


@dataclass(frozen=True)
class LoadInputs:
    """What other processes took of the CPUs this process may use, over a short sample."""

    usable: int
    busy: float | None  # CPUs of the allowed ones busy, on average; None: not read
    own: float  # of which this process and its children (doctor's own probes)
    sample_s: float
    loadavg: float | None  # the kernel's 1-minute load average


def check_load(inp: LoadInputs) -> CheckResult:
    """Warn when other processes take CPUs now: a run beside them waits for a CPU."""
    if inp.busy is None:
        return result(
            AREA, "ok", "cpu-load", "current load not measured (no /proc/stat)", ["off Linux"]
        )
    others = max(0.0, inp.busy - inp.own)
    evidence = [
        f"over {inp.sample_s:.1f} s, {inp.busy:.1f} of the {inp.usable} usable CPUs were busy, "
        f"{others:.1f} of them with other processes (doctor's own {inp.own:.1f} apart)"
    ]
    if inp.loadavg is not None:
        evidence.append(f"load average {inp.loadavg:.2f} over the last minute")
    if others < OTHERS_MIN:
        return result(AREA, "ok", "cpu-load", "no other process takes a CPU now", evidence)
    left = max(0.0, inp.usable - others)
    return result(
        AREA,
        "warn",
        "cpu-load",
        f"other processes take {others:.1f} of the {inp.usable} usable CPUs now: a job run "
        f"beside them gets about {left:.1f}",
        [*evidence, "a run measures the contention itself: cpu-starved says what it cost"],
        [
            "run it where its CPUs are its own: stop or move the other work",
            f"or size torch's threads to the CPUs left: torch.set_num_threads({max(1, int(left))})"
            f" (or OMP_NUM_THREADS={max(1, int(left))}); it keeps every CPU once the load goes",
        ],
    )


def gather_load(usable: int, sample_s: float = LOAD_SAMPLE_S) -> LoadInputs:
    """The busy time of the CPUs this process may use over ``sample_s`` (/proc/stat), and that
    of this process's tree (its probes run meanwhile)."""
    import psutil

    try:
        allowed: set[int] | None = set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        allowed = None
    loadavg = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    before, own0 = _busy_jiffies(allowed), _own_cpu_s(psutil)
    t0 = time.monotonic()
    time.sleep(sample_s)  # the sample itself: nothing to await
    after, own1 = _busy_jiffies(allowed), _own_cpu_s(psutil)
    elapsed = time.monotonic() - t0
    if before is None or after is None or elapsed <= 0:
        return LoadInputs(usable, None, 0.0, sample_s, loadavg)
    hz = os.sysconf("SC_CLK_TCK")
    cpus = len(allowed) if allowed else os.cpu_count() or usable
    busy = min(float(cpus), max(0.0, (after - before) / hz / elapsed))
    own = max(0.0, (own1 - own0) / elapsed)
    return LoadInputs(usable, busy, min(own, busy), elapsed, loadavg)


def _busy_jiffies(allowed: set[int] | None) -> int | None:
    """Busy jiffies (all but idle and iowait) of the allowed CPUs (every CPU: None)."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    total = 0
    for line in lines:
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu":
            continue
        if allowed is not None and int(name[3:]) not in allowed:
            continue
        v = [int(x) for x in rest.split()]
        total += sum(v[:8]) - v[3] - v[4]  # user nice system idle iowait irq softirq steal
    return total


def _own_cpu_s(psutil: Any) -> float:
    """CPU seconds of this process and its children, live or waited for, so far."""
    me = psutil.Process()
    mine = me.cpu_times()
    total = mine.children_user + mine.children_system  # children it has waited for
    for p in [me, *me.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
    return total
