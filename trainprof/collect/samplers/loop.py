"""The sampling thread: every interval, one line of host (and GPU) readings into samples.jsonl.

Two things keep a day-long run's samples small: a row leaves out what has not changed since
it was last written (``RowCompactor``), and after the first ten minutes the default interval
widens from 0.5 s to 2 s (``sample_interval``) — memory growth, swap and utilization are
trends by then, and a tick every 2 s still sees them.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from trainprof.collect.samplers.gpu import GpuSampler
from trainprof.collect.samplers.host import HostSampler
from trainprof.store.rundir import open_private

STATIC_PROC_FIELDS = ("ppid", "name", "nofile", "threads")
DEFAULT_INTERVAL_S = 0.5
LONG_RUN_AFTER_S = 600.0
LONG_RUN_INTERVAL_S = 2.0


def sample_interval(elapsed_s: float, base_s: float, adaptive: bool) -> float:
    """The interval at this point of the run (an explicit --interval is kept as given)."""
    if adaptive and elapsed_s >= LONG_RUN_AFTER_S:
        return max(base_s, LONG_RUN_INTERVAL_S)
    return base_s


class RowCompactor:
    """Drops from each row what has not changed since it was last written: a process's name,
    parent, limits and thread count, the totals of memory, swap and /dev/shm, an unavailable
    GPU. ``Samples.add`` keeps the last value it saw for each (670 → ~350 bytes a tick for a
    job with two workers)."""

    def __init__(self) -> None:
        self._static: dict[Any, dict[str, Any]] = {}  # pid → fields last written
        self._totals: dict[str, Any] = {}
        self._gpu_written: dict[str, Any] | None = None

    def compact(self, row: dict[str, Any]) -> dict[str, Any]:
        out = dict(row)
        procs = []
        for p in row.get("procs") or []:
            static = {k: p[k] for k in STATIC_PROC_FIELDS if k in p}
            if self._static.get(p.get("pid")) == static:
                p = {k: v for k, v in p.items() if k not in STATIC_PROC_FIELDS}
            else:
                self._static[p.get("pid")] = static
            procs.append(p)
        out["procs"] = procs
        for key in ("mem", "swap", "shm"):
            part = row.get(key)
            if isinstance(part, dict) and "total" in part:
                if self._totals.get(key) == part["total"]:
                    out[key] = {k: v for k, v in part.items() if k != "total"}
                else:
                    self._totals[key] = part["total"]
        gpu = row.get("gpu")
        if isinstance(gpu, dict) and gpu == self._gpu_written:
            del out["gpu"]
        self._gpu_written = gpu if isinstance(gpu, dict) else None
        return out


class SamplerLoop:
    def __init__(
        self, root_pid: int, path: Path, interval: float = DEFAULT_INTERVAL_S, adaptive: bool = True
    ) -> None:
        self.interval = interval
        self.adaptive = adaptive
        self.host = HostSampler(root_pid)
        self.gpu = GpuSampler()
        self.latest: dict[str, Any] | None = None
        self.count = 0
        self._compactor = RowCompactor()
        # (monotonic time, why) writing samples.jsonl stopped (a full disk); sampling goes on
        # for the live view, and the file keeps what it had.
        self.write_error: tuple[float, str] | None = None
        self._out: Any = None
        try:
            self._out = open_private(path)
        except OSError as exc:
            self.write_error = (time.monotonic(), exc.strerror or str(exc))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="trainprof-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.gpu.close()
        if self._out is not None:
            try:
                self._out.close()
            except OSError:
                pass

    def tick(self) -> None:
        row = self.host.sample()
        gpus = self.gpu.sample()
        row["gpu"] = gpus if gpus is not None else {"unavailable": self.gpu.unavailable}
        line = json.dumps(self._compactor.compact(row), separators=(",", ":")) + "\n"
        self._write(line.encode())
        self.latest = row
        self.count += 1

    def _write(self, data: bytes) -> None:
        out = self._out
        if out is None:
            return
        try:
            view = memoryview(data)
            while view:
                view = view[out.write(view) :]
        except OSError as exc:
            self.write_error = (time.monotonic(), exc.strerror or str(exc))
            self._out = None
            try:
                out.close()
            except OSError:
                pass

    def _run(self) -> None:
        started = time.monotonic()
        while True:
            try:
                self.tick()
            except Exception:  # a sampler must never take the run down
                pass
            wait = sample_interval(time.monotonic() - started, self.interval, self.adaptive)
            if self._stop.wait(wait):
                return
