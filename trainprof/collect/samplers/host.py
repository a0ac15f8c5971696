"""psutil samples of the job's process tree and the machine, taken from outside the job.

Races are normal (a worker exits between listing and reading): such a process is skipped.
A value that could not be read is None, never 0.
"""

from __future__ import annotations

import os
import shutil
import time
from typing import Any

import psutil

from trainprof.collect.samplers.proctree import child_pids, process_tree
from trainprof.collect.samplers.smaps import SmapsSchedule, minor_faults, read_smaps
from trainprof.doctor.cgroup import limits_of, quota_stat_file, read_throttling
from trainprof.store.schema import ENV_DISABLE

SHM_PATH = "/dev/shm"


class HostSampler:
    def __init__(self, root_pid: int) -> None:
        self.root_pid = root_pid
        self._procs: dict[int, psutil.Process] = {}
        self._last_swap: tuple[float, int, int] | None = None
        # PSS and USS come from smaps_rollup, a walk of every resident page: read within a CPU
        # budget (``SmapsSchedule``); the GPU bench switches them off (TRAINPROF_PROBE_DISABLE=uss).
        # USS is written for forked children only (a DataLoader worker: its RSS counts the
        # parent's pages it touched); PSS for every process read, for the job's real memory.
        self.uss = "uss" not in os.environ.get(ENV_DISABLE, "").split(",")
        self.smaps = SmapsSchedule()
        self._forked: dict[int, bool] = {}
        # trainprof's own processes: this one (the runner, or attach) and its children outside
        # the job's tree (py-spy): their CPU is the report's own cost, and is not "other
        # processes" competing with the job. Counted from here: the job has started.
        self._me = psutil.Process(os.getpid())
        self._me_start = _cpu_s(self._me)
        self._helpers: dict[int, tuple[psutil.Process, float]] = {}  # pid → (it, CPU s so far)
        self._helpers_gone_s = 0.0  # CPU seconds of helpers that ended, at their last reading
        self._own_t: float | None = None  # the last tick's (none yet: no interval)
        self._own_total = 0.0
        psutil.cpu_percent(None)  # prime the system-wide counter
        # A CPU quota on the job's cgroup (a container's --cpus, a Kubernetes limit): its
        # throttling counters, read each tick (one small file)
        limits = limits_of(root_pid)
        self._quota = limits.cpu_quota
        self._quota_stat = quota_stat_file(limits.cpu_quota, limits.cpu_source)

    def sample(self) -> dict[str, Any]:
        now = time.monotonic()
        procs = self._sample_tree(now)
        self_cpu, own_s = self._own_cpu(now, {p["pid"] for p in procs})
        row = {
            "t": round(now, 3),
            "procs": procs,
            "self_cpu": self_cpu,
            # CPU seconds of trainprof's own processes since sampling began: [this process,
            # its helpers (py-spy)]; cumulative, so the report's own cost needs no tick in between
            "own_s": own_s,
            "cpu": psutil.cpu_percent(None),
            "mem": _memory(),
            "swap": self._swap(now),
            "shm": shm_usage(),
        }
        quota = self._throttling()
        if quota is not None:  # most jobs have none: no key a tick
            row["quota"] = quota
        return row

    def _own_cpu(self, now: float, job: set[int]) -> tuple[float | None, list[float] | None]:
        """Percent of one CPU trainprof's own processes used since the last tick (a helper's
        CPU before its first tick is not in it), and their CPU seconds since sampling began:
        this process, and its children outside the job's tree."""
        try:
            mine = _cpu_s(self._me) - self._me_start
            pids = child_pids(self._me.pid)
            if pids is None:  # (a kernel without /proc/PID/task/TID/children)
                pids = [c.pid for c in self._me.children()]
        except psutil.Error:
            return None, None
        helpers: dict[int, tuple[psutil.Process, float]] = {}
        unseen = 0.0  # CPU of helpers first seen now, spent before this interval perhaps
        for pid in pids:
            if pid in job or pid == self.root_pid:
                continue
            known = self._helpers.get(pid)
            try:
                if known is not None and known[0].is_running():
                    child = known[0]
                else:  # new (or a new process under an old pid)
                    child = psutil.Process(pid)
                    known = None
                cpu = _cpu_s(child)
            except psutil.Error:
                continue
            if known is None:
                unseen += cpu
            helpers[pid] = (child, cpu)
        for pid, (child, cpu) in self._helpers.items():
            if pid not in helpers or helpers[pid][0] is not child:
                self._helpers_gone_s += cpu  # ended: its CPU up to its last reading
        self._helpers = helpers
        theirs = self._helpers_gone_s + sum(cpu for _, cpu in helpers.values())
        total, last = mine + theirs, self._own_t
        pct = None
        if last is not None and now > last:
            pct = max(0.0, (total - self._own_total - unseen) / (now - last) * 100)
        self._own_t, self._own_total = now, total
        return (None if pct is None else round(pct, 2)), [round(mine, 3), round(theirs, 3)]

    def _throttling(self) -> dict[str, Any] | None:
        if self._quota_stat is None:
            return None
        th = read_throttling(self._quota_stat)
        if th is None:
            return None
        return {
            "cpus": self._quota,
            "periods": th.periods,
            "throttled": th.throttled,
            "throttled_s": round(th.throttled_s, 4),
        }

    def _sample_tree(self, now: float) -> list[dict[str, Any]]:
        seen: dict[int, psutil.Process] = {}
        rows = []
        # fresh objects: a known process is told from a new one on its pid below
        for proc in process_tree(self.root_pid):
            known = self._procs.get(proc.pid)
            if known is not None and known.create_time() == proc.create_time():
                proc = known
            seen[proc.pid] = proc
            if known is None or proc.pid not in self._forked:
                self._forked[proc.pid] = _is_fork_child(proc)
            row = _read_process(proc, first=known is None)
            if row is not None:
                rows.append(row)
        self._procs = seen
        self._forked = {pid: v for pid, v in self._forked.items() if pid in seen}
        if self.uss:
            self._read_smaps(now, rows)
        return rows

    def _read_smaps(self, now: float, rows: list[dict[str, Any]]) -> None:
        """PSS (and a forked child's USS) of the processes due for a read, within the budget."""
        live = {row["pid"]: row for row in rows if "rss" in row}
        faults = {
            pid: n for pid in live if self._forked.get(pid) and (n := minor_faults(pid)) is not None
        }
        for pid in self.smaps.due(now, {pid: row["rss"] for pid, row in live.items()}, faults):
            if not self.smaps.may_read():
                break
            began = time.thread_time()  # the kernel's page walk is this thread's system time
            got = read_smaps(self._procs[pid])
            self.smaps.done(pid, now, live[pid]["rss"], time.thread_time() - began, faults.get(pid))
            if got is not None:
                live[pid]["pss"] = got.pss
                if self._forked.get(pid):
                    live[pid]["uss"] = got.uss

    def _swap(self, now: float) -> dict[str, Any] | None:
        try:
            sw = psutil.swap_memory()
        except Exception:
            return None
        row: dict[str, Any] = {"total": sw.total, "used": sw.used, "in_bps": None, "out_bps": None}
        last = self._last_swap
        if last is not None and now > last[0]:
            dt = now - last[0]
            row["in_bps"] = max(0.0, (sw.sin - last[1]) / dt)
            row["out_bps"] = max(0.0, (sw.sout - last[2]) / dt)
        self._last_swap = (now, sw.sin, sw.sout)
        return row


def _read_process(proc: psutil.Process, first: bool) -> dict[str, Any] | None:
    """The cheap readings of one process (its stat, statm, status, schedstat, affinity, fds and
    limits); ``uss`` stays None until ``_read_smaps`` reads it."""
    try:
        with proc.oneshot():
            cpu = proc.cpu_percent(None)
            mem = proc.memory_info()
            row: dict[str, Any] = {
                "pid": proc.pid,
                "ppid": proc.ppid(),
                "name": proc.name(),
                "cpu": None if first else cpu,  # the first reading has no interval yet
                "rss": mem.rss,
                "uss": None,
                "rq_wait": _optional(lambda: run_queue_wait(proc.pid)),
                # the CPUs its affinity allows (taskset, cpusets): the job's, not trainprof's
                "cpus": _optional(lambda: len(os.sched_getaffinity(proc.pid))),
                "fds": _optional(proc.num_fds),
                "threads": _optional(proc.num_threads),
            }
            limits = _optional(lambda: proc.rlimit(psutil.RLIMIT_NOFILE))
            row["nofile"] = list(limits) if limits else None
        return row
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return None
    except psutil.AccessDenied:
        return {"pid": proc.pid, "denied": True}


def _cpu_s(proc: psutil.Process) -> float:
    """User and system CPU seconds of a process so far (its own, not its reaped children's)."""
    t = proc.cpu_times()
    return t.user + t.system


def _is_fork_child(proc: psutil.Process) -> bool:
    """A process forked from its parent without exec (a DataLoader worker under the fork start
    method) has its parent's command line; a rank under torchrun, a spawned worker or a shell's
    child has its own."""
    try:
        parent = proc.parent()
        return parent is not None and parent.cmdline() == proc.cmdline()
    except (psutil.Error, OSError):
        return False


def run_queue_wait(pid: int) -> float:
    """Seconds the process's main thread has waited, runnable, for a CPU (the kernel's
    schedstat): what a busy machine takes from a job, apart from what the job itself does."""
    with open(f"/proc/{pid}/task/{pid}/schedstat", encoding="ascii") as f:
        return int(f.read().split()[1]) / 1e9


def _optional(read: Any) -> Any:
    try:
        return read()
    except (
        psutil.AccessDenied,
        psutil.NoSuchProcess,
        psutil.ZombieProcess,
        OSError,
        AttributeError,
    ):
        return None


def _memory() -> dict[str, int] | None:
    try:
        vm = psutil.virtual_memory()
    except Exception:
        return None
    return {"total": vm.total, "available": vm.available, "used": vm.used}


def shm_usage(path: str = SHM_PATH) -> dict[str, int] | None:
    if not os.path.isdir(path):
        return None
    try:
        du = shutil.disk_usage(path)
    except OSError:
        return None
    return {"total": du.total, "used": du.used}
