"""Buffered, fork-aware writer of one process's event file.

Records are appended to a deque (thread-safe append, no lock on the hot path) and written in
one ``os.write`` when 256 are queued, once a second from a daemon thread (so a hung job's last
records still reach the disk), at exit, and before a DataLoader worker leaves. The file and
its header are created lazily at the first flush, so a forked child that never records
anything leaves no file, and a child's header carries the role it learned after the fork.
"""

from __future__ import annotations

import collections
import json
import os
import sys
import threading
import time
from collections.abc import Callable

from trainprof.store.schema import MAGIC, SCHEMA_VERSION, STEP, event_file_name

FLUSH_EVERY_RECORDS = 256
FLUSH_EVERY_S = 1.0


class EventWriter:
    def __init__(self, run_dir: str) -> None:
        self.run_dir = run_dir
        self.t0 = time.monotonic()
        self.wall0 = time.time()
        self.role = "main"
        self.role_info: dict[str, object] = {}
        self._queue: collections.deque[str] = collections.deque()
        # Step records wait here unformatted: formatting a line right after the step's torch
        # work costs ~5 µs (cold caches); a batch of them at a flush costs <1 µs each.
        self._steps: collections.deque[tuple[float, float, float, float, int, int, int]] = (
            collections.deque()
        )
        self._fd: int | None = None
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.on_tick: Callable[[], None] | None = None  # runs before each timed flush

    def us(self, t: float) -> int:
        """Microseconds since this process's t0, the unit of every record."""
        return int((t - self.t0) * 1e6)

    def add(self, line: str) -> None:
        self._queue.append(line)
        self._queued(len(self._queue))

    def add_step(self, rec: tuple[float, float, float, float, int, int, int]) -> None:
        """(end, previous end, wait s, sampler s, batch size, fetches, samples) of one step."""
        self._steps.append(rec)
        self._queued(len(self._steps))

    def _queued(self, waiting: int) -> None:
        """After a record was queued: flush a full queue, or make sure the timer runs."""
        if waiting >= FLUSH_EVERY_RECORDS:
            self.flush()
        elif self._thread is None:
            self._start_thread()

    def set_role(self, role: str, **info: object) -> None:
        self.role = role
        self.role_info = dict(info)

    def after_fork_in_child(self) -> None:
        """A forked child starts its own file; the parent's queued records are not its own."""
        self._queue = collections.deque()
        self._steps = collections.deque()
        self._fd = None
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._thread = None
        self.role = "fork"
        self.role_info = {}

    def flush(self) -> None:
        if self._closed:
            return
        with self._lock:
            q, sq = self._queue, self._steps
            n, ns = len(q), len(sq)
            if n == 0 and ns == 0:
                return
            parts = [q.popleft() for _ in range(n)]
            if ns:
                t0 = self.t0
                parts += [
                    f"{STEP} {int((t - t0) * 1e6)} {int((t - prev) * 1e6)} {int(wait * 1e6)} "
                    f"{int(sampler * 1e6)} {bs} {fetches} {samples}\n"
                    for t, prev, wait, sampler, bs, fetches, samples in [
                        sq.popleft() for _ in range(ns)
                    ]
                ]
            data = "".join(parts)
            if self._fd is None:
                self._fd = self._open()
            os.write(self._fd, data.encode("utf-8", "replace"))

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self._closed = True

    def _open(self) -> int:
        path = os.path.join(self.run_dir, event_file_name(self._pid))
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(path, flags, 0o600)
        header = {
            "magic": "trainprof-events",
            "version": SCHEMA_VERSION,
            "pid": self._pid,
            "ppid": os.getppid(),
            "role": self.role,
            **self.role_info,
            "argv": list(getattr(sys, "argv", [])),
            "executable": sys.executable,
            "t0": self.t0,
            "wall0": self.wall0,
            "rank": _int_env("RANK"),
            "local_rank": _int_env("LOCAL_RANK"),
            "world_size": _int_env("WORLD_SIZE"),
        }
        os.write(fd, (MAGIC + json.dumps(header) + "\n").encode())
        return fd

    def _start_thread(self) -> None:
        t = threading.Thread(target=self._flush_loop, name="trainprof-flush", daemon=True)
        self._thread = t
        t.start()

    def _flush_loop(self) -> None:
        me = threading.current_thread()
        while self._thread is me and not self._closed:
            time.sleep(FLUSH_EVERY_S)
            try:
                if self.on_tick is not None:
                    self.on_tick()
                self.flush()
            except Exception:
                return


def _int_env(name: str) -> int | None:
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None
