"""Main-thread stack samples of the job, taken from outside with py-spy in chunks: how long a
chunk is, at what rate it samples, which chunks are kept (``spy_recorder.py`` runs py-spy).

py-spy writes a Chrome trace (begin/end events per frame with microsecond timestamps relative
to its own start) when it is stopped; each chunk notes the monotonic time it started py-spy so
the analysis can line stack samples up with steps.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

from trainprof.collect.samplers.pyspy import interrupt
from trainprof.collect.samplers.spy_recorder import SpyRecorder
from trainprof.store.stacks import GZ, pack

DEFAULT_RATE_HZ = 50


# py-spy keeps its trace in memory until it exits: record in 5-minute pieces
# (TRAINPROF_STACK_CHUNK_S overrides it, for tests of the hand-over between pieces).
CHUNK_S = int(os.environ.get("TRAINPROF_STACK_CHUNK_S", "300") or 300)
FAST_CHUNKS = 2  # the first 10 minutes at the full rate, then LONG_RUN_RATE_HZ
LONG_RUN_RATE_HZ = 10
# Kept besides the first FAST_CHUNKS: the chunks in between are deleted as new ones start, so
# a day-long job keeps ~60 MB of traces (gzipped once finished: ~2 MB; not ~1.4 GB) and its
# report parses them in ~1 s. The price: stacks of a stall in the middle of a long run are gone
# by its end (recent ones stay).
KEEP_LAST_CHUNKS = 3
# py-spy's own CPU, as a share of one CPU, above which it samples less often: it reads every
# thread of the job at each sample, so a job of hundreds of threads makes it costly (18 % of a
# CPU at 50 Hz for 500 idle threads, against 0.5 % for one thread).
SPY_BUDGET = 0.05
COST_WINDOW_S = 2.0  # py-spy's CPU is measured over this long
MIN_RATE_HZ = 2
SPY_STARTUP_S = 1.0


class StackRecorder(SpyRecorder):
    """Runs py-spy in consecutive chunks (``stacks-N.json``, gzipped once finished), so neither
    py-spy's memory nor the files grow without bound on a long job; later chunks sample at a
    lower rate."""

    def __init__(
        self, pid: int, run_dir: Path, rate_hz: int = DEFAULT_RATE_HZ, label: str | None = None
    ) -> None:
        super().__init__(pid, run_dir / (f"py-spy-{label}.log" if label else "py-spy.log"))
        self.run_dir = run_dir
        self.rate_hz = rate_hz
        # files of a second recorder of the same run (another rank): stacks-rank1-0.json
        self._prefix = f"stacks-{label}" if label else "stacks"
        self.chunks: list[dict[str, object]] = []
        self._started = 0  # chunks started so far (names stay unique after old ones are deleted)
        self.error: str | None = None
        self._cost_mark: tuple[float, float] | None = None  # (monotonic, py-spy's CPU seconds)
        self.budget = SPY_BUDGET  # lower while the job's CPUs are busy (stack_starter.py)
        # each time the rate was lowered for py-spy's cost: for the report's cost row, never
        # said while the job runs (the job's output is the user's)
        self.rate_changes: list[dict[str, float]] = []
        # py-spy runs stopped for a lower rate, still writing their chunk
        self._retiring: list[tuple[subprocess.Popen[bytes], dict[str, object]]] = []

    @property
    def started_at(self) -> float | None:
        return float(self.chunks[0]["started_at"]) if self.chunks else None  # type: ignore[arg-type]

    def start(self) -> bool:
        n = self._started
        # the first FAST_CHUNKS chunks' time at the full rate (by the clock: a chunk started for
        # a lower rate does not end it)
        first = self.started_at
        fast = first is None or time.monotonic() - first < FAST_CHUNKS * CHUNK_S
        rate = self.rate_hz if fast else min(self.rate_hz, LONG_RUN_RATE_HZ)
        name = f"{self._prefix}-{n}.json"
        why = self.record(self.run_dir / name, rate, CHUNK_S)
        if why is not None:
            self.error = why
            return False
        self._cost_mark = None
        started = self.pieces[-1].started_at
        self.chunks.append({"file": name, "started_at": started, "rate_hz": rate})
        self._started += 1
        return True

    def poll(self) -> None:
        """While the job runs: when a chunk has finished, start the next one (first, so that
        packing the finished one leaves no gap in the stacks); when py-spy costs more than
        ``SPY_BUDGET`` of a CPU, go on in a new chunk at a rate within it."""
        self._reap()
        if self.proc is not None and self.proc.poll() is not None and self.error is None:
            finished = self.chunks[-1] if self.chunks else None
            self.start()
            if finished is not None:
                self._pack(finished)
            self._forget_middle_chunks()
        elif self.proc is not None and self.error is None:
            self._keep_within_budget(self.proc)

    def _reap(self, wait_s: float | None = None) -> None:
        """Pack the chunks of the py-spy runs stopped for a lower rate once they are written
        (``wait_s``: wait that long for each)."""
        for proc, chunk in list(self._retiring):
            if wait_s is not None:
                interrupt(proc, wait_s)
            elif proc.poll() is None:
                continue
            self._retiring.remove((proc, chunk))
            if (self.run_dir / str(chunk["file"])).is_file():
                self._pack(chunk)
            elif chunk in self.chunks:
                self.chunks.remove(chunk)

    def _keep_within_budget(self, proc: subprocess.Popen[bytes]) -> None:
        """Measure py-spy's CPU (each chunk's ``spy_cpu``: a share of one CPU); above the
        budget, sample in a new chunk at the rate that fits it (not under MIN_RATE_HZ)."""
        cpu, now = _cpu_seconds(proc.pid), time.monotonic()
        if cpu is None:
            return
        if self._cost_mark is None:
            started = float(self.chunks[-1]["started_at"])  # type: ignore[arg-type]
            if now - started >= SPY_STARTUP_S:  # not its start-up, which reads the binaries
                self._cost_mark = (now, cpu)
            return
        then, before = self._cost_mark
        share = (cpu - before) / max(now - then, 1e-9)
        # a lower budget is judged over a longer window (CPU time is counted in 10 ms ticks);
        # a share above SPY_BUDGET, at once
        budget = min(self.budget, SPY_BUDGET) if share <= SPY_BUDGET else SPY_BUDGET
        if now - then < COST_WINDOW_S * SPY_BUDGET / budget:
            return
        self._cost_mark = (now, cpu)
        chunk = self.chunks[-1]
        chunk["spy_cpu"] = round(share, 3)
        rate = int(chunk["rate_hz"])  # type: ignore[call-overload]
        # under a lowered budget, room for the measure's noise before py-spy restarts again
        if share <= budget * (1.0 if budget >= SPY_BUDGET else 1.25) or rate <= MIN_RATE_HZ:
            return
        chunk["spy_budget"] = budget
        self.rate_hz = max(MIN_RATE_HZ, int(rate * budget / share))
        if not self.start():  # the new chunk first: no gap in the stacks
            return
        with contextlib.suppress(ProcessLookupError):  # it writes its chunk, reaped later:
            proc.send_signal(signal.SIGINT)  # the runner's loop does not wait for it
        self._retiring.append((proc, chunk))
        first = self.started_at
        self.rate_changes.append(
            {
                "at_s": round(now - first, 1) if first is not None else 0.0,
                "from_hz": rate,
                "to_hz": self.rate_hz,
                "spy_cpu": round(share, 3),
                "budget": budget,
            }
        )

    def _pack(self, chunk: dict[str, object]) -> None:
        """Gzip a finished chunk; run.json names it by its new name from the next write on."""
        packed = pack(self.run_dir / str(chunk["file"]))
        if packed is not None:
            chunk["file"] = packed.name

    def _forget_middle_chunks(self) -> None:
        """Delete the oldest chunk after the first FAST_CHUNKS once more than KEEP_LAST_CHUNKS
        follow them (the one being recorded counts)."""
        while len(self.chunks) > FAST_CHUNKS + KEEP_LAST_CHUNKS:
            old = self.chunks.pop(FAST_CHUNKS)
            with contextlib.suppress(OSError):
                (self.run_dir / str(old["file"])).unlink()

    def stop(self, timeout: float = 10.0) -> None:
        """py-spy writes its file when interrupted (or when the target exits by itself)."""
        self._reap(timeout)
        if self.proc is None:
            return
        super().stop(timeout)
        self.chunks = [c for c in self.chunks if (self.run_dir / str(c["file"])).is_file()]
        for chunk in self.chunks:
            if not str(chunk["file"]).endswith(GZ):
                self._pack(chunk)
        if not self.chunks:
            self.error = self.log_tail() or "py-spy wrote no samples"


def _cpu_seconds(pid: int) -> float | None:
    """User and system CPU time of a process so far (None: it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None
