"""Whether a job that stopped stepping is at work or hung: a few looks, a second or two apart.

A silence longer than the hang limit is not always a hang: a final evaluation over tensors held
in memory, a checkpoint written to disk or uploaded, a model exported — each makes no step, no
batch and no backward for as long as it takes, and ``--on-hang kill`` (or ``trainprof ci``) must
not stop it there. A hang keeps still: a deadlock, a wait for a batch no worker sends, a
collective a peer never joins leave the job's Python stacks where they are and read or write
nothing. Work moves one or the other, so a silent job is at work when a stack of its processes
(a training process's, or a DataLoader worker's making a batch) moves between looks, or it reads
or writes at least ``MOVED_BYTES``.

What this cannot tell: a single long call into native code that reads and writes nothing (one
huge matrix product) keeps as still as a hang, and so does a busy loop on one line; both are
called a hang, as before.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import psutil

from trainprof.analysis.attribution import is_user_file, short_name
from trainprof.collect.samplers.hang import dump_one
from trainprof.collect.samplers.proctree import process_tree
from trainprof.collect.samplers.pyspy import py_spy_path
from trainprof.limits import MOVED_BYTES
from trainprof.store.dumps import parse
from trainprof.store.stacks import Frame
from trainprof.units import fmt_bytes

LOOK_FOR_S = 2.0  # the looks span this long before the watch decides
MAX_STACKED = 16  # processes whose stacks are looked at (of a big job: its first ranks first)


@dataclass(frozen=True)
class Look:
    t: float
    io_bytes: int | None  # read and written by the job's processes so far; None: unread
    # (pid, its main thread's frames, innermost first) of each training process looked at
    stacks: tuple[tuple[int, tuple[Frame, ...]], ...]


def look(root_pid: int, training_pids: Iterable[int], t: float) -> Look:
    """One look: the job's I/O so far, and the main-thread stacks of its processes, up to
    ``MAX_STACKED``: its training processes first (``training_pids``, those that stepped), then
    the others (DataLoader workers: one making a batch for longer than the silence is at work).
    Each dump holds the runner's loop ~50 ms; only while a silence is looked at."""
    procs = process_tree(root_pid)
    exe = py_spy_path()
    if exe is None:  # no stacks to compare: the I/O alone
        return Look(t, io_bytes(procs), ())
    pids = sorted(training_pids)
    pids += [p.pid for p in procs if p.pid not in pids]
    stacks = []
    for pid in pids[:MAX_STACKED]:
        dumps = parse(f"=== pid {pid} (job) ===\n{dump_one(exe, pid)}")
        main = dumps[0].main if dumps else None
        if main is not None and main.frames:
            stacks.append((pid, main.frames))
    return Look(t, io_bytes(procs), tuple(stacks))


def io_bytes(procs: list[psutil.Process]) -> int | None:
    """Bytes the processes have read and written so far (None: no counter could be read)."""
    total, read = 0, 0
    for proc in procs:
        with contextlib.suppress(psutil.Error, AttributeError):  # gone, or no I/O counters
            io = proc.io_counters()
            # the bytes its read and write calls returned (sockets and pipes too), and the bytes
            # it sent to storage, counted as pages are dirtied: one long write() shows in these
            chars = io.read_chars + io.write_chars  # type: ignore[attr-defined]  # Linux only
            total += chars + io.read_bytes + io.write_bytes
            read += 1
    return total if read else None


def why_at_work(looks: Sequence[Look]) -> str | None:
    """What shows the job at work across ``looks`` (the first to the last), or None: it kept
    still, a hang."""
    if len(looks) < 2:
        return None
    first, last = looks[0], looks[-1]
    seconds = last.t - first.t
    if first.io_bytes is not None and last.io_bytes is not None:
        moved = last.io_bytes - first.io_bytes
        if moved >= MOVED_BYTES:
            return f"its processes read or wrote {fmt_bytes(moved)} in {seconds:.1f} s"
    by_pid: dict[int, set[tuple[Frame, ...]]] = {}
    for one in looks:
        for pid, frames in one.stacks:
            by_pid.setdefault(pid, set()).add(frames)
    for pid, seen in by_pid.items():
        if len(seen) > 1:
            latest = dict(last.stacks).get(pid) or next(iter(seen))
            user = next((f for f in latest if is_user_file(f[1])), None)
            where = f", now in {short_name(user[0])}()" if user else ""
            return (
                f"the main thread of pid {pid} moved: {len(seen)} different stacks in "
                f"{len(looks)} looks over {seconds:.1f} s{where}"
            )
    return None
