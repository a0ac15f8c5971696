"""The device timeline: CUDA events at the step boundaries the probe already sees, so a step's
forward, backward, optimizer and the device's idle gap before the next step are timed on the
GPU's own clock. Imports nothing at start-up; torch is handed in once the job trains on CUDA.

About one step in ``EVERY`` is timed (and the first mark of the step after it, to close the
gap), at a jittered stride (``EVERY`` / 2 to 3 × ``EVERY`` / 2) so that no pattern of the loop
with a period dividing the stride is always missed or always hit (an H200 run timed only the
first step of each 8-step epoch, never the epoch's restart, and under-measured the idle gap by
30 %), and at most ``MAX_PER_S`` times a second (a fast, host-bound loop pays per timed step).
Events are recorded on the current stream of the model's device and never waited for: a timed step's events are read
(``query()``, then ``elapsed_time``) at a later step boundary, once the GPU has passed them, so
the job never synchronizes because of trainprof. Allocator statistics are read at the same
time (they are host-side counters: no sync either).

Marks, in step order: ``batch`` (a DataLoader batch returned: forward starts, with its
host→device copy), ``backward`` (``torch.autograd.backward`` called), ``optimizer`` (the step's
pre-hook) and ``end`` (its post-hook). A loop without a DataLoader has no ``batch`` mark: its
forward is then counted from the previous step's end (the gap stays unknown).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from trainprof.store.schema import DEVICE

EVERY = 16  # time about one step in this many (five event records and a memory read each)
MAX_PER_S = 8.0  # and no more timed steps than this a second
MAX_PENDING = 8  # timed steps whose events the GPU has not passed yet; beyond, stop timing
MARKS = ("batch", "backward", "optimizer", "end")

_clock = time.monotonic


class Timeline:
    """Events of the timed steps, and their lazy read-out into ``G`` records."""

    def __init__(
        self,
        make_event: Callable[[], Any],
        memory: Callable[[], tuple[int, int, int]] | None,
        emit: Callable[[str], None],
        us: Callable[[float], int],
        capturing: Callable[[], bool] = lambda: False,
        record: Callable[[Any], None] = lambda event: event.record(),
    ) -> None:
        self.make_event = make_event
        self.record = record  # records an event on the current stream of the model's device
        # Inside a CUDA graph capture (a whole step captured with torch.cuda.graph) an event
        # query is illegal and would invalidate the user's capture: no CUDA call then.
        self.capturing = capturing
        self.memory = memory
        self.emit = emit
        self.us = us
        self.step = 0  # optimizer steps seen
        self.stride = random.Random(EVERY)  # its own generator: the job's random state is untouched
        self.next_timed = EVERY  # the next step to time
        self.last_timed_at = -1e9  # when the last timed step started (monotonic s)
        self.min_gap_s = 0.0  # and how long to wait after it (jittered like the stride)
        self.current: dict[str, tuple[Any, float]] | None = None  # marks of the timed step
        self.closing: tuple[int, dict[str, tuple[Any, float]]] | None = None  # waits for its gap
        self.pending: list[tuple[int, dict[str, tuple[Any, float]]]] = []
        self.pool: list[Any] = []

    def _event(self) -> Any:
        return self.pool.pop() if self.pool else self.make_event()

    def mark(self, name: str) -> None:
        """A step boundary: record an event if this step is timed (first mark of a name wins)."""
        closes = self.closing is not None and name != "end"
        cur = self.current
        if not closes and (cur is None or name in cur):
            return  # the common case: no CUDA call at all
        if self.capturing():
            self._abandon()
            return
        if self.closing is not None and closes:
            # The first mark of the step after a timed one closes its gap.
            step, marks = self.closing
            self.closing = None
            marks["next"] = self._record()
            self.pending.append((step, marks))
        if cur is not None and name not in cur:
            cur[name] = self._record()

    def _abandon(self) -> None:
        """Give up the timed step (and the gap being closed): a capture cut through it."""
        for marks in (self.current, self.closing[1] if self.closing else None):
            if marks:
                self.pool.extend(ev for ev, _t in marks.values())
        self.current = self.closing = None

    def _record(self) -> tuple[Any, float]:
        ev = self._event()
        self.record(ev)
        return ev, _clock()

    def step_ended(self) -> None:
        """The optimizer post-hook: close the timed step, decide on the next, read what is done."""
        self.mark("end")
        if self.current is not None:
            self.closing = (self.step, self.current)
            self.current = None
        self.step += 1
        if self.step >= self.next_timed:
            now = _clock()
            if now - self.last_timed_at >= self.min_gap_s and len(self.pending) < MAX_PENDING:
                self.current = {}
                self.last_timed_at = now
                self.min_gap_s = self.stride.uniform(0.5, 1.5) / MAX_PER_S
                self.next_timed = self.step + self.stride.randint(EVERY // 2, EVERY * 3 // 2)
        self.read_done()

    def read_done(self) -> None:
        if self.pending and self.capturing():
            return  # read them after the capture
        while self.pending:
            step, marks = self.pending[0]
            last = marks["next"][0]
            if not last.query():
                return  # the GPU has not got there yet: read it at a later boundary
            self.pending.pop(0)
            self.emit(self._line(step, marks))
            self.pool.extend(ev for ev, _t in marks.values())

    def _line(self, step: int, marks: dict[str, tuple[Any, float]]) -> str:
        """``G t step dev_fwd dev_bwd dev_opt dev_gap host_fwd host_bwd host_opt host_gap
        allocated reserved peak`` — µs, -1 where a mark is missing; bytes."""
        names = ("batch", "backward", "optimizer", "end", "next")
        dev, host = [], []
        for a, b in zip(names, names[1:], strict=False):
            if a in marks and b in marks:
                dev.append(int(marks[a][0].elapsed_time(marks[b][0]) * 1e3))
                host.append(int((marks[b][1] - marks[a][1]) * 1e6))
            else:
                dev.append(-1)
                host.append(-1)
        alloc, reserved, peak = self.memory() if self.memory is not None else (-1, -1, -1)
        fields = [self.us(marks["end"][1]), step, *dev, *host, alloc, reserved, peak]
        return f"{DEVICE} " + " ".join(str(f) for f in fields) + "\n"


def cuda_timeline(
    torch: Any, device: Any, emit: Callable[[str], None], us: Callable[[float], int]
) -> Timeline:
    """A timeline on the CUDA ``device`` the model trains on (called once the first optimizer
    step shows its parameters there).

    Every call names that device: a job that trains on ``cuda:1`` without
    ``torch.cuda.set_device`` still has device 0 as its current device, and an event recorded
    on the current stream would time an idle GPU and create a CUDA context on GPU 0 (hundreds
    of MB there, in every rank of such a job)."""
    cuda = torch.cuda

    def record(event: Any) -> None:
        event.record(cuda.current_stream(device))

    def memory() -> tuple[int, int, int]:
        # One allocator read: memory_allocated(), memory_reserved() and max_memory_allocated()
        # each flatten and sort all of memory_stats() in Python (~80 µs apiece on a slow core).
        stats = cuda.memory_stats_as_nested_dict(device)
        allocated = stats.get("allocated_bytes", {}).get("all", {})
        reserved = stats.get("reserved_bytes", {}).get("all", {})
        return allocated.get("current", -1), reserved.get("current", -1), allocated.get("peak", -1)

    # A capture is what this thread is doing now, on its current stream (torch.cuda.graph makes
    # the capture stream current), whichever device the model is on.
    capturing = cuda.is_current_stream_capturing
    return Timeline(lambda: cuda.Event(enable_timing=True), memory, emit, us, capturing, record)
