"""The probe's event writer never raises into the job: a full disk stops recording, a file that
cannot be opened yet (EMFILE) keeps its records for the next flush."""

from __future__ import annotations

import errno
import importlib
import os
import time
from pathlib import Path

import pytest

from trainprof.probe.writer import FLUSH_EVERY_RECORDS, EventWriter


def _step(w: EventWriter) -> None:
    now = time.monotonic()
    w.add_step((now, now - 0.01, 0.0, 0.0, 8, 1, 8))


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_disk_stops_recording_and_never_raises(tmp_path: Path) -> None:
    w = EventWriter(str(tmp_path))
    w._open = lambda: os.open("/dev/full", os.O_WRONLY)  # type: ignore[method-assign]
    for _ in range(3 * FLUSH_EVERY_RECORDS):  # the 256th flushes where it is queued: ENOSPC
        _step(w)
        w.add("X {}\n")
    assert w.stopped is not None and w.stopped[1] == os.strerror(errno.ENOSPC)
    assert len(w.steps) == 0 and len(w._queue) == 0  # later records are dropped as they come
    assert (tmp_path / f"probe-stopped-{os.getpid()}-{errno.ENOSPC}").is_file()  # for the runner
    w.flush()
    w.close()


def test_a_file_that_cannot_be_opened_yet_keeps_its_records(tmp_path: Path) -> None:
    w = EventWriter(str(tmp_path))
    real_open = w._open
    tries = []

    def open_later() -> int:
        tries.append(1)
        if len(tries) == 1:
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
        return real_open()

    w._open = open_later  # type: ignore[method-assign]
    for _ in range(5):
        _step(w)
    w.flush()  # EMFILE: kept
    assert w.stopped is None and not list(tmp_path.iterdir())
    w.close()  # opened now: all five steps reach the file
    (path,) = tmp_path.iterdir()
    assert sum(1 for ln in path.read_text().splitlines() if ln.startswith("S ")) == 5


def test_a_late_timer_is_made_up_for_where_records_are_queued(tmp_path: Path) -> None:
    w = EventWriter(str(tmp_path))
    _step(w)  # starts the timer
    w._thread = None  # as if it had died
    w._due = w.step_check_at = time.monotonic() - 0.01  # and missed its flush
    _step(w)  # flushed here, and a timer started again
    (path,) = tmp_path.iterdir()
    assert sum(1 for ln in path.read_text().splitlines() if ln.startswith("S ")) == 2
    assert w._thread is not None and w._thread.is_alive()
    w.close()


def test_a_flush_that_would_wait_on_its_own_thread_gives_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signal handler calling ``os._exit`` (which flushes first) can run in the very thread
    that holds the writer's lock: the flush must give up, not wait for itself for ever."""
    # (the module by its name: the package's ``writer`` attribute is a function)
    monkeypatch.setattr(importlib.import_module("trainprof.probe.writer"), "LOCK_WAIT_S", 0.05)
    w = EventWriter(str(tmp_path))
    _step(w)
    with w._lock:  # as if interrupted inside a flush
        w.flush()  # returns: the step stays queued
    assert len(w.steps) == 1 and not list(tmp_path.iterdir())
    w.close()
    (path,) = tmp_path.iterdir()
    assert sum(1 for ln in path.read_text().splitlines() if ln.startswith("S ")) == 1
