"""Once recording stopped, count the job's steps in a shared page the runner reads without writing.

The runner creates the run's ``progress`` file, one page of real zero bytes, before the job
starts. A write into a page already on disk needs no new space, so when the disk fills and a
process's event file stops growing, its probe goes on counting here (``stopped_sinks``): the
runner's hang watch still sees the job step, and does not take a silence of trainprof's making
for a hang. Each process has a slot (its pid modulo ``SLOTS``): its pid, the optimizer steps,
batches and backward passes it made since its recording stopped, and the monotonic time of the
latest. Standard library only: this runs inside the job.
"""

from __future__ import annotations

import collections
import mmap
import os
import struct
import time
from typing import Any

from trainprof.store.schema import BACKWARD, BATCH

PROGRESS_FILE = "progress"
SLOT = struct.Struct("<qqqqd")  # pid, steps, batches, backward passes, last monotonic time
SLOT_BYTES = 64
SLOTS = 64
SIZE = SLOT_BYTES * SLOTS  # one page


class StoppedSink:
    """Stands in for a record queue of ``EventWriter`` once its recording stopped: keeps no
    record, counts the progress ones into this process's slot of the progress page."""

    def __init__(self, page: mmap.mmap) -> None:
        self._page = page
        self._pid = 0
        self._counts = [0, 0, 0]  # steps, batches, backward passes

    def __len__(self) -> int:
        return 0

    def append(self, record: Any) -> None:
        if isinstance(record, tuple):  # a step: (end time, ...)
            which, t = 0, float(record[0])
        elif isinstance(record, str) and record[:1] in (BATCH, BACKWARD):
            which, t = (1 if record[:1] == BATCH else 2), time.monotonic()
        else:
            return
        pid = os.getpid()
        if pid != self._pid:  # the first record, or a forked child's: a slot of its own
            self._pid, self._counts = pid, [0, 0, 0]
        self._counts[which] += 1
        try:
            SLOT.pack_into(self._page, (pid % SLOTS) * SLOT_BYTES, pid, *self._counts, t)
        except (ValueError, OSError):  # the page was closed: nothing to count into
            pass


def stopped_sinks(run_dir: str) -> tuple[Any, Any]:
    """The record queues of a writer whose recording stopped: sinks into the progress page,
    or empty queues that drop every record where the page cannot be mapped."""
    try:
        fd = os.open(os.path.join(run_dir, PROGRESS_FILE), os.O_RDWR | os.O_NOFOLLOW)
        try:
            page = mmap.mmap(fd, SIZE)
        finally:
            os.close(fd)
    except (OSError, ValueError):
        return collections.deque(maxlen=0), collections.deque(maxlen=0)
    sink = StoppedSink(page)  # one for both queues: one count per process
    return sink, sink
