"""The sampling thread: every interval, one line of host (and GPU) readings into samples.jsonl."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from trainprof.samplers.gpu import GpuSampler
from trainprof.samplers.host import HostSampler
from trainprof.store.rundir import open_private


class SamplerLoop:
    def __init__(self, root_pid: int, path: Path, interval: float) -> None:
        self.interval = interval
        self.host = HostSampler(root_pid)
        self.gpu = GpuSampler()
        self.latest: dict[str, Any] | None = None
        self.count = 0
        self._out = open_private(path)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="trainprof-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.gpu.close()
        self._out.close()

    def tick(self) -> None:
        row = self.host.sample()
        gpus = self.gpu.sample()
        row["gpu"] = gpus if gpus is not None else {"unavailable": self.gpu.unavailable}
        self._out.write((json.dumps(row, separators=(",", ":")) + "\n").encode())
        self.latest = row
        self.count += 1

    def _run(self) -> None:
        while True:
            try:
                self.tick()
            except Exception:  # a sampler must never take the run down
                pass
            if self._stop.wait(self.interval):
                return
