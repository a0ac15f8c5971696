"""The device timeline: CUDA events at the step boundaries the probe already sees, so a step's
forward, backward, optimizer and the device's idle gap before the next step are timed on the
GPU's own clock. Imports nothing at start-up; torch is handed in once the job trains on CUDA.

About one step in ``EVERY`` is timed (and the first mark of the step after it, to close the
gap), at a jittered stride (``EVERY`` / 2 to 3 × ``EVERY`` / 2) so that no pattern of the loop
with a period dividing the stride is always missed or always hit (an H200 run timed only the
first step of each 8-step epoch, never the epoch's restart, and under-measured the idle gap by
30 %), and at most ``MAX_PER_S`` times a second (a fast, host-bound loop pays per timed step).
Events are recorded on the current stream of the model's device and never waited for: a
timed step's events are read (``query()``, then ``elapsed_time``) at a later step boundary, once
the GPU has passed them, so the job never synchronizes because of trainprof. Allocator
statistics are read at the same time (they are host-side counters: no sync either).

Marks, in step order: ``batch`` (a DataLoader batch returned: forward starts, with its
host→device copy), ``backward`` (``torch.autograd.backward`` called), ``optimizer`` (the step's
pre-hook) and ``end`` (its post-hook). A step that accumulates gradients over micro-batches
repeats ``fetch`` (a later micro-batch is asked of the DataLoader), ``batch`` and ``backward``
once per micro-batch: each interval counts for the phase of the mark that opens it, so forward
and backward are summed over the step's micro-batches (the first batch alone would be 1/k of
the forward), and ``fetch`` → ``batch`` is the GPU's idle time waiting for a micro-batch (about
nothing when the GPU is behind the host). A loop without a DataLoader has no ``batch`` mark: its
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
# Marks repeated once per micro-batch, with the room each needs for the rest of its micro-batch:
# past MAX_MARKS a step's last recorded mark is a backward, so the micro-batches not marked count
# as backward (compute), never as a wait for data.
REPEATED = {"fetch": 3, "batch": 2, "backward": 1}
MAX_MARKS = 96  # per timed step: ~30 micro-batches
# The phase an interval counts for, by the mark that opens it: G record positions (dev, host).
PHASE = {"batch": 0, "backward": 1, "optimizer": 2, "end": 3, "fetch": 4}

Mark = tuple[str, Any, float]  # name, event, host monotonic time

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
        # No timed step starts before this (monotonic s): the last one's start and a gap of
        # about 1 / MAX_PER_S, jittered like the stride.
        self.not_before = -1e9
        self.current: list[Mark] | None = None  # marks of the timed step, in order
        self.closing: tuple[int, list[Mark]] | None = None  # a timed step waiting for its gap
        self.pending: list[tuple[int, list[Mark]]] = []
        self.pool: list[Any] = []
        # A timed step or a gap being closed: a mark records an event. The probe's hooks test
        # this before calling ``mark``, so an untimed step costs them one attribute read.
        self.active = False

    def _event(self) -> Any:
        return self.pool.pop() if self.pool else self.make_event()

    def mark(self, name: str) -> None:
        """A step boundary: record an event if this step is timed (``optimizer`` and ``end``
        once a step, the micro-batch marks each time, up to ``MAX_MARKS``)."""
        closes = self.closing is not None and name != "end"
        cur = self.current
        if not closes and cur is None:
            return  # the common case: no CUDA call at all
        if name in REPEATED:
            records = cur is not None and len(cur) + REPEATED[name] <= MAX_MARKS
        else:
            records = cur is not None and all(m[0] != name for m in cur)
        if not closes and not records:
            return
        if self.capturing():
            self._abandon()
            return
        if self.closing is not None and closes:
            # The first mark of the step after a timed one closes its gap.
            step, marks = self.closing
            self.closing = None
            marks.append(self._record("next"))
            self.pending.append((step, marks))
            self.active = cur is not None
        if cur is not None and records:
            cur.append(self._record(name))

    def _abandon(self) -> None:
        """Give up the timed step (and the gap being closed): a capture cut through it."""
        for marks in (self.current, self.closing[1] if self.closing else None):
            if marks:
                self.pool.extend(ev for _name, ev, _t in marks)
        self.current = self.closing = None
        self.active = False

    def _record(self, name: str) -> Mark:
        ev = self._event()
        self.record(ev)
        return name, ev, _clock()

    def step_ended(self) -> None:
        """The optimizer post-hook: close the timed step, decide on the next, read what is done.

        On a step that is not ``active``, with nothing ``pending``, and either ``step + 1``
        short of ``next_timed`` or the time short of ``not_before``, all it does is
        ``step += 1``: the probe's post-hook does that inline (a call costs microseconds on a GPU
        host's cold caches), so keep the two in step."""
        if self.active:
            self.mark("end")
            if self.current is not None:
                self.closing = (self.step, self.current)
                self.current = None
        self.step += 1
        if self.step >= self.next_timed:
            now = _clock()
            if now >= self.not_before and len(self.pending) < MAX_PENDING:
                self.current = []
                self.active = True
                self.not_before = now + self.stride.uniform(0.5, 1.5) / MAX_PER_S
                self.next_timed = self.step + self.stride.randint(EVERY // 2, EVERY * 3 // 2)
        if self.pending:
            self.read_done()

    def read_done(self) -> None:
        if self.pending and self.capturing():
            return  # read them after the capture
        while self.pending:
            step, marks = self.pending[0]
            if not marks[-1][1].query():
                return  # the GPU has not got there yet: read it at a later boundary
            self.pending.pop(0)
            self.emit(self._line(step, marks))
            self.pool.extend(ev for _name, ev, _t in marks)

    def _line(self, step: int, marks: list[Mark]) -> str:
        """``G t step dev_fwd dev_bwd dev_opt dev_gap host_fwd host_bwd host_opt host_gap
        allocated reserved peak dev_data host_data`` — µs summed over the step's intervals by
        the phase of the mark that opens each (``data``: fetch → batch of later micro-batches),
        -1 where no interval opened that phase; bytes."""
        dev, host = [-1] * len(PHASE), [-1] * len(PHASE)
        for (name, ev, t), (_next, ev_next, t_next) in zip(marks, marks[1:], strict=False):
            k = PHASE[name]
            dev[k] = max(dev[k], 0) + int(ev.elapsed_time(ev_next) * 1e3)
            host[k] = max(host[k], 0) + int((t_next - t) * 1e6)
        alloc, reserved, peak = self.memory() if self.memory is not None else (-1, -1, -1)
        end_t = next(t for name, _ev, t in marks if name == "end")
        fields = [self.us(end_t), step, *dev[:4], *host[:4], alloc, reserved, peak, dev[4], host[4]]
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
