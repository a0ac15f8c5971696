"""The runner's side of the progress page: created before the job, read while it runs.

The probe counts into it once its recording stopped (``trainprof.probe.progress``): the steps a
job makes on a full disk, which its event files no longer show.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from dataclasses import dataclass
from pathlib import Path

from trainprof.probe.progress import PROGRESS_FILE, SIZE, SLOT, SLOT_BYTES, SLOTS


@dataclass(frozen=True)
class Unrecorded:
    """What the job's processes made since their recording stopped."""

    last_t: float | None  # monotonic time of the latest step, batch or backward pass
    steps: int
    batches: int
    backwards: int
    pids: tuple[int, ...]  # the processes that counted here

    def total(self) -> int:
        return self.steps + self.batches + self.backwards


NOTHING = Unrecorded(None, 0, 0, 0, ())


def create(run_dir: Path) -> bool:
    """Write the page of zeros (real bytes, synced: its blocks exist before the disk fills)."""
    path = run_dir / PROGRESS_FILE
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError:
        return False
    try:
        os.write(fd, bytes(SIZE))
        os.fsync(fd)
        return True
    except OSError:
        os.close(fd)
        fd = -1
        with contextlib.suppress(OSError):
            path.unlink()
        return False
    finally:
        if fd >= 0:
            os.close(fd)


class ProgressPage:
    """Reads the page the probes count into (a page-cache read: no disk space, no disk I/O)."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / PROGRESS_FILE
        self._page: mmap.mmap | None = None

    def read(self) -> Unrecorded:
        page = self._page or self._open()
        if page is None:
            return NOTHING
        last: float | None = None
        steps = batches = backwards = 0
        pids = []
        for i in range(SLOTS):
            pid, s, b, k, t = SLOT.unpack_from(page, i * SLOT_BYTES)
            if pid <= 0:
                continue
            pids.append(pid)
            steps, batches, backwards = steps + s, batches + b, backwards + k
            last = t if last is None or t > last else last
        return Unrecorded(last, steps, batches, backwards, tuple(pids))

    def _open(self) -> mmap.mmap | None:
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            try:
                self._page = mmap.mmap(fd, SIZE, prot=mmap.PROT_READ)
            finally:
                os.close(fd)
        except (OSError, ValueError):
            return None
        return self._page
