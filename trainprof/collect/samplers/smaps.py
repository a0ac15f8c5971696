"""Which processes' smaps_rollup the host sampler reads on a tick: those that need it, within a
CPU budget.

A read of ``/proc/PID/smaps_rollup`` (PSS, and USS: the pages a process alone holds) walks
every resident page of the process under its memory-map lock: 3–5 ms for a 300 MB CPU torch
process on a 2-core VM, ~100 ms for a CUDA job's GBs. Read for every process at every tick, it
was most of the sampler's CPU, and grew with each DataLoader worker. So a process is read:
when it is new; when its RSS (a cheap read) rose above its level at the last read (a new high:
a peak, a leak) or fell far below it; when the tree's processes changed since (a fork, an
exit); and after ``MAX_AGE_S``, or longer where reading every process that often would take
more than ``AGE_BUDGET`` of a CPU (copy-on-write pages turning private move no RSS). And only
while the reads' CPU stays within ``BUDGET`` of one CPU on average (``BURST_S`` of it at once,
so that a new job's processes are read together).
"""

from __future__ import annotations

from dataclasses import dataclass

import psutil

BUDGET = 0.02  # share of one CPU the reads may use, on average
BURST_S = 0.1  # CPU seconds of reads that may be spent at once
MAX_AGE_S = 10.0
AGE_BUDGET = 0.0025  # share of one CPU the reads for age alone may use (longer ages on big jobs)
# RSS above its level at the last read (a new high: a peak, a leak) by this share or bytes...
ROSE_SHARE, ROSE_BYTES = 0.01, 2 * 2**20
# ... or below it by this much (the steps of a steady job's allocator stay under it)
FELL_SHARE, FELL_BYTES = 0.05, 16 * 2**20
# ... or a forked child took this many minor page faults since (2 MiB of 4 KiB pages): a page
# it shared with its parent and wrote is copied on a fault, its USS grows, its RSS does not
FAULT_PAGES = 512


@dataclass(frozen=True)
class Smaps:
    pss: int  # its pages, each shared page counted as 1/N of the N processes that map it
    uss: int  # the pages it alone maps (private clean, private dirty)


def read_smaps(proc: psutil.Process) -> Smaps | None:
    """One read (psutil falls back to /proc/PID/smaps where smaps_rollup is missing); None where
    it cannot be read (gone, not ours)."""
    try:
        full = proc.memory_full_info()
    except (psutil.Error, OSError, AttributeError):
        return None
    return Smaps(int(full.pss), int(full.uss))


class SmapsSchedule:
    """The processes due for a read, most needed first, and the CPU credit left to read them."""

    def __init__(self, budget: float = BUDGET, burst_s: float = BURST_S) -> None:
        self.budget = budget
        self.burst_s = burst_s
        self.credit_s = burst_s
        self.spent_s = 0.0  # CPU seconds all reads took
        self.reads = 0
        self._t: float | None = None
        # pid → (when read, its RSS then, the tree's count then, the read's CPU seconds)
        self._last: dict[int, tuple[float, int, int, float]] = {}
        self._faults: dict[int, int] = {}  # pid → its minor faults at its last read
        self._members: frozenset[int] = frozenset()
        self._tree = 0  # counts the changes of the tree's members

    def due(
        self, now: float, rss: dict[int, int], faults: dict[int, int] | None = None
    ) -> list[int]:
        """The processes of ``rss`` (pid → RSS now) to read: never read first; then those whose
        RSS rose or fell most, or read before the tree last changed (a fork shares a parent's
        pages, an exit leaves fewer sharers: PSS moves, RSS does not), or that took
        ``FAULT_PAGES`` minor faults since (``faults``: pid → its count now, for forked
        children: copy-on-write moves USS, not RSS); then the oldest reads."""
        faults = faults or {}
        if self._t is not None:
            self.credit_s = min(self.burst_s, self.credit_s + (now - self._t) * self.budget)
        self._t = now
        if frozenset(rss) != self._members:
            self._members = frozenset(rss)
            self._tree += 1
        self._last = {pid: v for pid, v in self._last.items() if pid in rss}
        self._faults = {pid: v for pid, v in self._faults.items() if pid in rss}
        ranked: list[tuple[int, float, int]] = []
        for pid, now_rss in rss.items():
            last = self._last.get(pid)
            if last is None:
                ranked.append((0, 0.0, pid))
                continue
            when, then_rss, tree, cost_s = last
            moved = now_rss - then_rss
            rose = moved >= max(ROSE_BYTES, ROSE_SHARE * then_rss)
            fell = -moved >= max(FELL_BYTES, FELL_SHARE * then_rss)
            then_faults = self._faults.get(pid)
            faulted = (
                pid in faults
                and then_faults is not None
                and faults[pid] - then_faults >= FAULT_PAGES
            )
            if rose or fell or faulted or tree != self._tree:
                ranked.append((1, -abs(moved) / max(then_rss, 1), pid))
            elif now - when >= max(MAX_AGE_S, cost_s * len(rss) / AGE_BUDGET):
                ranked.append((2, when, pid))
        return [pid for *_, pid in sorted(ranked)]

    def may_read(self) -> bool:
        return self.credit_s > 0

    def done(self, pid: int, now: float, rss: int, cpu_s: float, faults: int | None = None) -> None:
        """A read of ``pid`` (successful or not) that took ``cpu_s`` of this thread's CPU;
        ``faults``: its minor faults then, where counted."""
        self._last[pid] = (now, rss, self._tree, cpu_s)
        if faults is not None:
            self._faults[pid] = faults
        self.credit_s -= cpu_s
        self.spent_s += cpu_s
        self.reads += 1


def minor_faults(pid: int) -> int | None:
    """The minor page faults a process took so far (``/proc/PID/stat``), None where unread."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return int(stat[stat.rindex(b")") + 2 :].split()[7])
    except (OSError, ValueError, IndexError):
        return None
