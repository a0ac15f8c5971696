"""Pass the job's output through byte for byte, and keep a bounded copy in the run directory.

Each stream gets a thread that copies from the job's pipe (or pty) to trainprof's own stream
as soon as bytes arrive. The copy on disk keeps the first ``HEAD_BYTES`` and the last
``TAIL_BYTES`` of each stream, so a job that prints gigabytes costs megabytes, and the end of
the output (where the traceback is) is always kept. The copy is masked as it is written (line by
line, ``store.redact.StreamMasker``), before it is cut: no moment leaves a secret on disk, even
if trainprof is killed; the terminal gets the job's bytes as they are. Should the copy fail (a
full disk), the copy stops and the job's output keeps flowing: ``log_error`` says when and why.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from trainprof.store.redact import StreamMasker, current
from trainprof.store.rundir import open_private

HEAD_BYTES = 4 * 1024 * 1024
TAIL_BYTES = 1024 * 1024
HAND_ON_AFTER_S = 0.3  # the job's end to its output's: longer, a process it left holds it
POLL_MS = 100

# Copies its descriptor to its standard output until the last writer closes it.
RELAY = """
import os, sys
fd = int(sys.argv[1])
try:
    while data := os.read(fd, 65536):
        view = memoryview(data)
        while view:
            view = view[os.write(1, view):]
except OSError:
    pass
"""


class TerminalLock:
    """Serialises job output and trainprof's live status line on the same terminal."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.status_shown = False
        self.at_line_start = True

    def clear_status(self, fd: int) -> None:
        if self.status_shown:
            write_all(fd, b"\r\x1b[K")
            self.status_shown = False


class StreamPump:
    def __init__(
        self, source_fd: int, dest_fd: int, log_path: Path, terminal: TerminalLock | None
    ) -> None:
        self.source_fd = source_fd
        self.dest_fd = dest_fd
        self.log_path = log_path
        self.terminal = terminal
        self.total_bytes = 0  # the job's, as written
        self.total_lines = 0
        self._masker = StreamMasker(current())
        self._kept_bytes = 0  # of the masked copy: what the head and the tail are cut from
        self._tail = bytearray()
        self.log_error: tuple[float, str] | None = None  # (monotonic time, why) the copy stopped
        self._log: Any = None  # the raw file open_private returns; None once the copy failed
        try:
            self._log = open_private(log_path)
        except OSError as exc:
            self._log_failed(exc)
        self.reader_gone = False  # trainprof's own stream's reader went away (EPIPE)
        self.relay_pid: int | None = None  # the relay the stream was handed on to
        self._handing_on = threading.Event()
        self._thread = threading.Thread(target=self._run, name="trainprof-pump", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def hand_on(self, grace_s: float = HAND_ON_AFTER_S) -> None:
        """After the job's main process ended: wait for the end of its output; where a process
        it left (a daemon) still holds the stream, pass what is there and hand the stream on to
        a relay that outlives trainprof (``relay_pid``), as if the process wrote to trainprof's
        own stream: trainprof ends now, the process writes on."""
        self._thread.join(grace_s)
        if self._thread.is_alive():
            self._handing_on.set()
            self._thread.join(5)

    def _run(self) -> None:
        poller = select.poll()
        poller.register(self.source_fd, select.POLLIN)
        try:
            while True:
                if not poller.poll(POLL_MS):  # nothing to read yet
                    if self._handing_on.is_set():
                        self._start_relay()
                        break
                    continue
                try:
                    data = os.read(self.source_fd, 65536)
                except OSError:  # EIO: the pty's last writer closed it
                    break
                if not data:
                    break
                if not self._forward(data):
                    break  # our reader is gone: the job sees its broken pipe, as without us
                self._keep(data)
        finally:
            self._finish()

    def _forward(self, data: bytes) -> bool:
        """Pass the bytes on; False once trainprof's own stream's reader went away (EPIPE)."""
        term = self.terminal
        try:
            if term is None:
                write_all(self.dest_fd, data)
                return True
            with term.lock:
                term.clear_status(self.dest_fd)
                write_all(self.dest_fd, data)
                term.at_line_start = data.endswith(b"\n")
        except BrokenPipeError:
            self.reader_gone = True
            return False
        except OSError:
            pass  # our own stream failed otherwise (a full disk): keep draining the job's
        return True

    def _start_relay(self) -> None:
        """Hand the job's stream on to a detached relay process (see ``hand_on``)."""
        try:
            relay = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", RELAY, str(self.source_fd)],
                stdin=subprocess.DEVNULL,
                stdout=self.dest_fd,
                stderr=subprocess.DEVNULL,
                pass_fds=(self.source_fd,),
                start_new_session=True,  # no signal of trainprof's group reaches it
            )
            self.relay_pid = relay.pid
        except OSError:
            pass  # no relay: the process writing on gets a broken pipe once trainprof ends

    def _keep(self, data: bytes) -> None:
        self.total_bytes += len(data)
        self.total_lines += data.count(b"\n")
        self._keep_masked(self._masker.feed(data))

    def _keep_masked(self, data: bytes) -> None:
        room = HEAD_BYTES - self._kept_bytes
        if room > 0:
            self._write_log(data[:room])
        if len(data) > room:
            self._tail += data[max(room, 0) :]
            if len(self._tail) > 2 * TAIL_BYTES:
                del self._tail[: len(self._tail) - TAIL_BYTES]
        self._kept_bytes += len(data)

    def _write_log(self, data: bytes) -> None:
        """Append to the copy on disk; the first error stops the copy for good."""
        log = self._log
        if log is None:
            return
        try:
            view = memoryview(data)
            while view:
                view = view[log.write(view) :]
        except OSError as exc:
            self._log_failed(exc)

    def _log_failed(self, exc: OSError) -> None:
        self.log_error = (time.monotonic(), exc.strerror or str(exc))
        log, self._log = self._log, None
        if log is not None:
            try:
                log.close()
            except OSError:
                pass

    def _finish(self) -> None:
        try:
            self._keep_masked(self._masker.flush())
            if self._kept_bytes > HEAD_BYTES:
                tail = bytes(self._tail[-TAIL_BYTES:])
                omitted = self._kept_bytes - HEAD_BYTES - len(tail)
                if omitted > 0:
                    self._write_log(f"\n[trainprof: {omitted} bytes omitted]\n".encode())
                self._write_log(tail)
            if self._log is not None:
                try:
                    self._log.close()
                except OSError as exc:
                    self._log = None
                    self.log_error = self.log_error or (time.monotonic(), exc.strerror or str(exc))
        finally:
            try:
                os.close(self.source_fd)
            except OSError:
                pass


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
