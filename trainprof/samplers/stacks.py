"""Main-thread stack samples of the job, taken from outside with py-spy (``--nonblocking``: the
job is never paused, so the probe's overhead budget is untouched).

py-spy writes a Chrome trace (begin/end events per frame with microsecond timestamps relative
to its own start) when it is stopped; the runner notes the monotonic time it started py-spy so
the analysis can line stack samples up with steps.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from pathlib import Path

from trainprof.samplers.pyspy import interrupt, py_spy_path, record_command, start_record
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


class StackRecorder:
    """Runs py-spy in consecutive chunks (``stacks-N.json``, gzipped once finished), so neither
    py-spy's memory nor the files grow without bound on a long job; later chunks sample at a
    lower rate."""

    def __init__(
        self, pid: int, run_dir: Path, rate_hz: int = DEFAULT_RATE_HZ, label: str | None = None
    ) -> None:
        self.pid = pid
        self.run_dir = run_dir
        self.rate_hz = rate_hz
        # files of a second recorder of the same run (another rank): stacks-rank1-0.json
        self._prefix = f"stacks-{label}" if label else "stacks"
        self.chunks: list[dict[str, object]] = []
        self._started = 0  # chunks started so far (names stay unique after old ones are deleted)
        self.error: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log = run_dir / (f"py-spy-{label}.log" if label else "py-spy.log")

    @property
    def spy_pid(self) -> int | None:
        """The py-spy process recording the current chunk (its own session: pgid = pid)."""
        return self._proc.pid if self._proc is not None else None

    @property
    def started_at(self) -> float | None:
        return float(self.chunks[0]["started_at"]) if self.chunks else None  # type: ignore[arg-type]

    def start(self) -> bool:
        exe = py_spy_path()
        if exe is None:
            self.error = "py-spy not found"
            return False
        n = self._started
        rate = self.rate_hz if n < FAST_CHUNKS else min(self.rate_hz, LONG_RUN_RATE_HZ)
        name = f"{self._prefix}-{n}.json"
        cmd = record_command(exe, self.pid, rate, CHUNK_S, self.run_dir / name)
        started = time.monotonic()
        proc = start_record(cmd, self._log)
        if isinstance(proc, str):
            self.error = proc
            return False
        self._proc = proc
        self.chunks.append({"file": name, "started_at": started, "rate_hz": rate})
        self._started += 1
        return True

    def poll(self) -> None:
        """While the job runs: when a chunk has finished, start the next one (first, so that
        packing the finished one leaves no gap in the stacks)."""
        if self._proc is not None and self._proc.poll() is not None and self.error is None:
            finished = self.chunks[-1] if self.chunks else None
            self.start()
            if finished is not None:
                self._pack(finished)
            self._forget_middle_chunks()

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
        proc = self._proc
        if proc is None:
            return
        interrupt(proc, timeout)
        self.chunks = [c for c in self.chunks if (self.run_dir / str(c["file"])).is_file()]
        for chunk in self.chunks:
            if not str(chunk["file"]).endswith(GZ):
                self._pack(chunk)
        if not self.chunks:
            try:
                self.error = self._log.read_text(errors="replace").strip().splitlines()[-1][:300]
            except (OSError, IndexError):
                self.error = "py-spy wrote no samples"
