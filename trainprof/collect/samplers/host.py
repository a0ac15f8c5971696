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
from trainprof.doctor.cgroup import limits_of, quota_stat_file, read_throttling
from trainprof.store.schema import ENV_DISABLE

SHM_PATH = "/dev/shm"


class HostSampler:
    def __init__(self, root_pid: int) -> None:
        self.root_pid = root_pid
        self._procs: dict[int, psutil.Process] = {}
        self._last_swap: tuple[float, int, int] | None = None
        # USS walks every resident page of /proc/PID/smaps_rollup under the process's
        # memory-map lock: 3 ms for a 290 MB CPU torch process here, more for a CUDA job's GBs,
        # and most of this sampler's CPU. Only a forked DataLoader worker needs it (its RSS
        # counts the parent's pages it touched), so only those are read (``_forked``); the GPU
        # bench can switch it off entirely (TRAINPROF_PROBE_DISABLE=uss).
        self.uss = "uss" not in os.environ.get(ENV_DISABLE, "").split(",")
        self._forked: dict[int, bool] = {}
        # trainprof's own processes: this one (the runner, or attach) and its children outside
        # the job's tree (py-spy): their CPU is said in the report, and is not "other processes"
        # competing with the job
        self._me = psutil.Process(os.getpid())
        self._me.cpu_percent(None)
        self._helpers: dict[int, psutil.Process] = {}
        psutil.cpu_percent(None)  # prime the system-wide counter
        # A CPU quota on the job's cgroup (a container's --cpus, a Kubernetes limit): its
        # throttling counters, read each tick (one small file)
        limits = limits_of(root_pid)
        self._quota = limits.cpu_quota
        self._quota_stat = quota_stat_file(limits.cpu_quota, limits.cpu_source)

    def sample(self) -> dict[str, Any]:
        now = time.monotonic()
        procs = self._sample_tree()
        row = {
            "t": round(now, 3),
            "procs": procs,
            "self_cpu": self._own_cpu({p["pid"] for p in procs}),
            "cpu": psutil.cpu_percent(None),
            "mem": _memory(),
            "swap": self._swap(now),
            "shm": shm_usage(),
        }
        quota = self._throttling()
        if quota is not None:  # most jobs have none: no key a tick
            row["quota"] = quota
        return row

    def _own_cpu(self, job: set[int]) -> float | None:
        """Percent of one CPU trainprof's own processes used since the last tick: this one and
        its children outside the job's tree (a child's first tick has no interval: not counted
        until its second)."""
        try:
            total = self._me.cpu_percent(None)
            pids = child_pids(self._me.pid)
            if pids is None:  # (a kernel without /proc/PID/task/TID/children)
                pids = [c.pid for c in self._me.children()]
        except psutil.Error:
            return None
        helpers: dict[int, psutil.Process] = {}
        for pid in pids:
            if pid in job or pid == self.root_pid:
                continue
            try:
                child = self._helpers.get(pid)
                if child is not None and child.is_running():
                    total += child.cpu_percent(None)
                else:  # new (or a new process under an old pid): its first reading
                    child = psutil.Process(pid)
                    child.cpu_percent(None)
            except psutil.Error:
                continue
            helpers[pid] = child
        self._helpers = helpers
        return round(total, 2)

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

    def _sample_tree(self) -> list[dict[str, Any]]:
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
            uss = self.uss and self._forked[proc.pid]
            row = _read_process(proc, first=known is None, uss=uss)
            if row is not None:
                rows.append(row)
        self._procs = seen
        self._forked = {pid: v for pid, v in self._forked.items() if pid in seen}
        return rows

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


def _read_process(proc: psutil.Process, first: bool, uss: bool = True) -> dict[str, Any] | None:
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
                "uss": _optional(lambda: proc.memory_full_info().uss) if uss else None,
                "rq_wait": _optional(lambda: run_queue_wait(proc.pid)),
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
