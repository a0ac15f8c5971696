"""Which processes py-spy samples during `trainprof run`, and when it starts on each.

The job's main Python process (rank 0 under torchrun) is sampled at the full rate: its stacks
feed every stack-reading rule. Every other torchrun rank on this node gets a recorder of its own
at a lower rate, so that a straggler that is not rank 0 is named with its own function (its
stacks are the only place its extra work shows; the other ranks' show only waiting).
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainprof.collect.interpreter import script_python
from trainprof.collect.samplers.stacks import SPY_BUDGET, StackRecorder
from trainprof.doctor.cpu import usable_cpu_count

if TYPE_CHECKING:
    from trainprof.collect.launcher import Job
    from trainprof.collect.live import LiveView

# The other ranks' stacks only say what a straggler does more of (a share of its time, its
# hottest line): 20 samples a second give hundreds in a short run, at 2/5 of py-spy's cost.
RANK_RATE_HZ = 20
MAX_OTHER_RANKS = 15  # ranks on one node besides the main one (16-GPU nodes); more are left out

# While the CPUs the job may use are busy, each CPU-second py-spy takes is one the job loses:
# once the job trains, py-spy then keeps within BUSY_SHARE of those CPUs (1.5 % of one CPU on
# 2 CPUs), not SPY_BUDGET of one. Busy: on average over the last BUSY_TICKS host samples, at
# least BUSY_AT of the machine's CPUs in use, or the job's processes using BUSY_AT of its CPUs.
BUSY_SHARE = 0.0075
BUSY_AT = 0.9
BUSY_TICKS = 10

OnStart = Callable[["StackStarter", StackRecorder, "int | None"], None]


class Busyness:
    """Whether the job's CPUs are busy, from the host sampler's rows."""

    def __init__(self, usable_cpus: int | None) -> None:
        self.usable = max(usable_cpus or 1, 1)
        self._shares: deque[float] = deque(maxlen=BUSY_TICKS)
        self._last_t: object = None
        self.training = False  # the job has made a step, batch or backward pass

    def feed(self, row: dict[str, Any] | None) -> None:
        """One host sample (the same row fed twice counts once)."""
        if not isinstance(row, dict) or row.get("t") == self._last_t:
            return
        self._last_t = row.get("t")
        machine = _num(row.get("cpu")) / 100  # of all the machine's CPUs
        job = sum(_num(p.get("cpu")) for p in row.get("procs") or () if isinstance(p, dict))
        self._shares.append(max(machine, job / 100 / self.usable))

    @property
    def busy(self) -> bool:
        return len(self._shares) >= 2 and sum(self._shares) / len(self._shares) >= BUSY_AT

    def spy_budget(self) -> float:
        """py-spy's budget now, as a share of one CPU."""
        if not (self.training and self.busy):
            return SPY_BUDGET
        return min(SPY_BUDGET, BUSY_SHARE * self.usable)


def _num(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


class StackStarter:
    """Starts py-spy on the job's main Python process (at once for a script; for any other
    command, such as a shell wrapper or torchrun, once the process that trains records its
    first step) and on every other rank once it steps."""

    def __init__(
        self, run_dir: Path, job: Job, command: list[str], on_start: OnStart | None = None
    ) -> None:
        self.run_dir = run_dir
        self.recorder: StackRecorder | None = None
        self.ranks: dict[int, StackRecorder] = {}  # the other ranks', by rank
        # (starter, the recorder, its previous chunk's py-spy pid) at each chunk of each recorder
        self.on_start = on_start
        self.followed = False  # switched to rank 0 (a script that launched torchrun itself)
        self.busyness = Busyness(usable_cpu_count())
        if command[0] in (sys.executable, script_python()[0]):  # a script: `python train.py`
            self._start_main(job.pid)

    def poll(self, live: LiveView) -> None:
        self.busyness.feed(live.latest_sample)
        # the busy budget protects the training: not the job's start-up, whose imports make
        # each of py-spy's samples dearer than a steady step's
        self.busyness.training = live.stats.last_progress is not None
        if self.recorder is None:
            # The process that trains: the first to record a step or batch (rank 0 under
            # torchrun; never a launcher such as torchrun's agent, which imports torch but does
            # not train).
            for pid, header in live.stats.stepping.items():
                if header.get("rank") in (None, 0):
                    self._start_main(pid)
                    break
        else:
            rank0 = self._rank0_elsewhere(live)
            if rank0 is not None:  # the script became a launcher (it exec'd torchrun): follow
                self.recorder.stop()  # rank 0, as for a `-- torchrun` command
                self._start_main(rank0)
            else:
                self._next_chunk(self.recorder)
        for rec in self.ranks.values():
            self._next_chunk(rec)
        self._start_other_ranks(live)

    def _next_chunk(self, rec: StackRecorder) -> None:
        previous = rec.spy_pid
        rec.budget = self.busyness.spy_budget()
        rec.poll()
        if rec.spy_pid != previous and self.on_start is not None:
            self.on_start(self, rec, previous)

    def _rank0_elsewhere(self, live: LiveView) -> int | None:
        """The pid of rank 0, or of a process without a rank (a script that trains in a
        ``multiprocessing`` child), when it trains and the sampled process does not (once)."""
        rec = self.recorder
        if rec is None or self.followed or rec.pid in live.stats.stepping:
            return None
        for pid, header in live.stats.stepping.items():
            if header.get("rank") in (0, None) and pid != rec.pid:
                self.followed = True
                return pid
        return None

    def _start_other_ranks(self, live: LiveView) -> None:
        main = self.recorder.pid if self.recorder is not None else None
        for pid, header in live.stats.stepping.items():
            rank = header.get("rank")
            if not isinstance(rank, int) or isinstance(rank, bool) or rank == 0 or pid == main:
                continue
            if rank in self.ranks or len(self.ranks) >= MAX_OTHER_RANKS:
                continue
            rec = StackRecorder(pid, self.run_dir, RANK_RATE_HZ, label=f"rank{rank}")
            self.ranks[rank] = rec
            self._started(rec)

    def _start_main(self, pid: int) -> None:
        self.recorder = StackRecorder(pid, self.run_dir)
        self._started(self.recorder)

    def _started(self, rec: StackRecorder) -> None:
        if rec.start() and self.on_start is not None:
            self.on_start(self, rec, None)

    def describe(self) -> dict[str, Any]:
        """run.json's ``stacks``: the main process's chunks, and each other rank's."""
        rec = self.recorder
        out: dict[str, Any] = (
            {
                "chunks": list(rec.chunks),
                "pid": rec.pid,
                "error": rec.error,
                "rate_changes": list(rec.rate_changes),
            }
            if rec is not None
            else {"error": "no Python main process with the probe was found"}
        )
        if self.ranks:
            out["ranks"] = [
                {"rank": rank, "pid": r.pid, "chunks": list(r.chunks), "error": r.error}
                for rank, r in sorted(self.ranks.items())
            ]
        return out

    def finish(self) -> dict[str, Any]:
        for rec in (self.recorder, *self.ranks.values()):
            if rec is not None:
                rec.stop()
        return self.describe()
