"""Buffered, fork-aware writer of one process's event file.

Records are appended to a deque (thread-safe append, no lock on the hot path) and written in
one ``os.write`` when 256 are queued, every half second from a daemon thread (so a hung job's
last records still reach the disk, and a job killed by SIGKILL loses at most its last half
second), at exit (``os._exit`` included), and before a DataLoader worker leaves. Should the
timer fall behind by more than a second (a dead or starved thread), the next record is flushed
where it is queued. The file and its header are created lazily at the first flush, so a forked
child that never records anything leaves no file, and a child's header carries the role it
learned after the fork.

A flush never raises into the job. A file that cannot be opened for now (EMFILE, the job's
own descriptors exhausted) keeps its records for the next flush; any other write error (a full
disk) stops recording in this process for good: later records are dropped as they come, and an
empty ``probe-stopped-<pid>-<errno>`` file tells the runner.
"""

from __future__ import annotations

import collections
import errno
import json
import os
import sys
import threading
import time
from collections.abc import Callable

from trainprof.store.redact import configure_in_job, redact
from trainprof.store.schema import (
    ENV_NO_REDACT,
    MAGIC,
    PROBE_STOPPED,
    SCHEMA_VERSION,
    STEP,
    event_file_name,
)

FLUSH_EVERY_RECORDS = 256
FLUSH_EVERY_S = 0.5  # the timer's period
MAX_AGE_S = 1.0  # a timer later than this: the next record is flushed where it is queued
LOCK_WAIT_S = 2.0  # a flush waits this long for another's to end, then leaves its records queued
MAX_PENDING_BYTES = 1 << 20  # kept for a file that cannot be opened yet (EMFILE)
TRANSIENT_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EAGAIN, errno.EINTR})


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
        # (public: the step hook appends to it; a new deque after a fork, so read it each time)
        self.steps: collections.deque[tuple[float, float, float, float, int, int, int]] = (
            collections.deque()
        )
        self._fd: int | None = None
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._due = float("inf")  # flush where a record is queued from then on (timer late)
        # A step record queued at or after this time (or the 256th) goes through _queued: the
        # timer's due time, or at once while no timer runs (see add_step)
        self.step_check_at = float("-inf")
        self._pending = b""  # formatted records whose file could not be opened yet
        self.stopped: tuple[float, str] | None = None  # (monotonic time, why) recording stopped
        self.on_tick: list[Callable[[], None]] = []  # run before each timed flush and at exit

    def us(self, t: float) -> int:
        """Microseconds since this process's t0, the unit of every record."""
        return int((t - self.t0) * 1e6)

    def add(self, line: str) -> None:
        self._queue.append(line)
        self._queued(len(self._queue), time.monotonic())

    def add_step(self, rec: tuple[float, float, float, float, int, int, int]) -> None:
        """(end, previous end, wait s, sampler s, batch size, fetches, samples) of one step."""
        steps = self.steps
        steps.append(rec)
        # _queued's tests, in two: this runs once per step (the step hook does the same inline)
        if len(steps) >= FLUSH_EVERY_RECORDS or rec[0] >= self.step_check_at:
            self._queued(len(steps), rec[0])

    def steps_queued(self, now: float) -> None:
        """After a step record was queued where ``add_step`` would call ``_queued``."""
        self._queued(len(self.steps), now)

    def _queued(self, waiting: int, now: float) -> None:
        """After a record was queued: flush a full queue or one the timer left waiting too long,
        or make sure the timer runs."""
        if waiting >= FLUSH_EVERY_RECORDS:
            self.flush()
        elif now >= self._due:
            self._late()
        elif self._thread is None:
            self._start_thread()

    def _late(self) -> None:
        """The timer missed its flush by more than MAX_AGE_S - FLUSH_EVERY_S (it died, or the
        job holds the GIL): flush here, and start a timer again if the old one is gone."""
        self.flush()
        t = self._thread
        if not self._closed and (t is None or not t.is_alive()):
            self._start_thread()

    def set_role(self, role: str, **info: object) -> None:
        self.role = role
        self.role_info = dict(info)

    def after_fork_in_child(self) -> None:
        """A forked child starts its own file; the parent's queued records are not its own."""
        self._pid = os.getpid()
        self._lock = threading.Lock()
        if self.stopped is not None:
            return  # recording stopped (a full disk): the child drops its records too
        self._due = float("inf")
        self.step_check_at = float("-inf")
        self._pending = b""
        self._queue = collections.deque()
        self.steps = collections.deque()
        self._fd = None
        self._thread = None
        self.role = "fork"
        self.role_info = {}

    def flush(self) -> None:
        """Write what is queued. Never raises (see the module's docstring)."""
        if self._closed:
            return
        # A bounded wait: a signal handler that exits (os._exit flushes first) can interrupt
        # this very thread inside a flush, and would wait for itself for ever.
        if not self._lock.acquire(timeout=LOCK_WAIT_S):
            return  # the records stay queued
        try:
            self._due = time.monotonic() + MAX_AGE_S
            self.step_check_at = self._due if self._thread is not None else float("-inf")
            self._write_queued()
        except Exception as exc:
            self._failed(exc)
        finally:
            self._lock.release()

    def _write_queued(self) -> None:
        q, sq = self._queue, self.steps
        n, ns = len(q), len(sq)
        if n == 0 and ns == 0 and not self._pending:
            return
        parts = [q.popleft() for _ in range(n)]
        if ns:
            parts.append(_step_lines([sq.popleft() for _ in range(ns)], self.t0))
        data = self._pending + "".join(parts).encode("utf-8", "replace")
        self._pending = b""
        if self._fd is None:
            try:
                self._fd = self._open()
            except OSError as exc:
                if exc.errno in TRANSIENT_ERRNOS and len(data) <= MAX_PENDING_BYTES:
                    self._pending = data  # e.g. EMFILE: try again at the next flush
                    return
                raise
        _write_all(self._fd, data)

    def _failed(self, exc: Exception) -> None:
        """Stop recording in this process: drop what is queued and every later record."""
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else repr(exc)
        self.stopped = (time.monotonic(), reason)
        self._closed = True
        self._due = self.step_check_at = float("inf")
        self._pending = b""
        from trainprof.probe.progress import stopped_sinks

        self._queue, self.steps = stopped_sinks(self.run_dir)  # its steps still count
        fd, self._fd = self._fd, None
        try:
            if fd is not None:
                os.close(fd)
            # An empty file (no data block) tells the runner; its mtime says when.
            name = f"{PROBE_STOPPED}{self._pid}-{getattr(exc, 'errno', None) or 0}"
            flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
            os.close(os.open(os.path.join(self.run_dir, name), flags, 0o600))
        except OSError:
            pass

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self._closed = True

    def _open(self) -> int:
        path = os.path.join(self.run_dir, event_file_name(self._pid))
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)
        header = {
            "magic": "trainprof-events",
            "version": SCHEMA_VERSION,
            "pid": self._pid,
            "ppid": os.getppid(),
            "role": self.role,
            **self.role_info,
            "argv": _argv(),
            "executable": sys.executable,
            "t0": self.t0,
            "wall0": self.wall0,
            "rank": _int_env("RANK"),
            "local_rank": _int_env("LOCAL_RANK"),
            "world_size": _int_env("WORLD_SIZE"),
        }
        line = (MAGIC + json.dumps(header) + "\n").encode()
        fd = os.open(path, flags, 0o600)
        try:
            _write_all(fd, line)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def start_timer(self) -> None:
        """Tick from now on, though nothing is queued: a DataLoader worker's counters are
        written at ticks only, and a persistent worker is killed at the job's exit, never
        reaching its own final flush."""
        if self._thread is None and not self._closed:
            self._start_thread()

    def _start_thread(self) -> None:
        t = threading.Thread(target=self._flush_loop, name="trainprof-flush", daemon=True)
        self._thread = t
        self._due = self.step_check_at = time.monotonic() + MAX_AGE_S
        try:
            t.start()
        except Exception:  # no thread to be had: records are flushed where they are queued
            pass

    def _flush_loop(self) -> None:
        me = threading.current_thread()
        while self._thread is me and not self._closed:
            time.sleep(FLUSH_EVERY_S)
            self.run_ticks()
            self.flush()

    def run_ticks(self) -> None:
        """What records counters or reads state at flush points (never raises)."""
        for tick in list(self.on_tick):
            try:
                tick()
            except Exception:
                pass


def _argv() -> list[str]:
    """This process's argv, secret values masked (by the argument's name, and each known value
    wherever it stands) unless the run said --no-redact."""
    argv = [str(a) for a in getattr(sys, "argv", [])]
    if os.environ.get(ENV_NO_REDACT) == "1":
        return argv
    masker = configure_in_job()
    return [masker.text(a) for a in redact(argv)]


_STEP_LINE = f"{STEP} %d %d %d %d %d %d %d\n"


def _step_lines(records: list[tuple[float, float, float, float, int, int, int]], t0: float) -> str:
    """Step records as event lines, µs truncated as ``int`` does, in one ``%`` (a quarter
    cheaper than an f-string a record)."""
    values: list[float] = []
    extend = values.extend
    for t, prev, wait, sampler, bs, fetches, samples in records:
        extend(((t - t0) * 1e6, (t - prev) * 1e6, wait * 1e6, sampler * 1e6, bs, fetches, samples))
    return (_STEP_LINE * len(records)) % tuple(values)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _int_env(name: str) -> int | None:
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None
