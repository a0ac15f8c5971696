"""py-spy on the processes of a running job, from outside: ``record --nonblocking`` (the job is
never paused, so an NCCL job never stalls on us), ``--idle`` (a thread blocked in I/O or a lock
is where the time goes too) and ``--subprocesses`` (DataLoader workers), by the recorder of
``samplers/spy_recorder.py``.

py-spy writes one Chrome trace for the whole tree when it stops (``--duration`` ran out, it
was sent SIGINT, or the target exited). ``split`` turns it into one trace per process, the
format ``store/stacks.py`` reads for `trainprof run`, so the same loader and analysis apply.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from trainprof.collect.samplers.spy_recorder import SpyRecorder
from trainprof.store.stacks import tid_key, write_packed

LOG = "py-spy.log"


def stacks_file(pid: int) -> str:
    """A process's trace, before it is written gzipped (``write_packed`` adds ``.gz``)."""
    return f"stacks-{pid}.json"


class TreeRecorder(SpyRecorder):
    """``py-spy record`` of one process and its subprocesses, in one or more segments.

    py-spy may stop by itself while the process lives on. In ``--subprocesses`` mode it stops
    at the first sample at which none of the processes it reads is running, and one it could
    not read counts as not running: seen on a job whose workers end with each epoch, "Stopped
    sampling because process exited" after 15 samples, none of them of the main process. A
    recording that stopped by itself while its process lives is started again for the time
    left; ``split`` joins the segments into one trace per process."""

    def __init__(self, pid: int, run_dir: Path, rate_hz: int, duration_s: float) -> None:
        super().__init__(pid, run_dir / LOG, subprocesses=True)
        self.run_dir = run_dir
        self.rate_hz = rate_hz
        self.duration_s = duration_s
        self.error: str | None = None

    @property
    def segments(self) -> list[tuple[Path, float]]:
        """Each recording's raw trace and its start (monotonic)."""
        return [(piece.path, piece.started_at) for piece in self.pieces]

    @property
    def started_at(self) -> float | None:
        return self.pieces[0].started_at if self.pieces else None

    def start(self, duration_s: float | None = None) -> bool:
        """Start a recording (the first, or one more for the ``duration_s`` left). Where the
        first cannot start, ``error`` says why; a later one that cannot leaves the earlier."""
        n = len(self.pieces)
        seconds = self.duration_s if duration_s is None else duration_s
        raw = self.run_dir / f"py-spy-raw-{self.pid}{f'-{n}' if n else ''}.json"
        why = self.record(raw, self.rate_hz, seconds)
        if why is not None and not n:
            self.error = why
        return why is None

    def pid_of_run(self) -> int:
        """The pid (and process group) of the latest py-spy run; 0 where none started."""
        return self.spy_pid or 0

    def stop(self, timeout: float = 20.0) -> None:
        """SIGINT: py-spy writes what it recorded (it does by itself when the target exits)."""
        if self.proc is None:
            return
        super().stop(timeout)
        if not any(raw.is_file() for raw, _t in self.segments):
            self.error = self.log_tail() or "py-spy wrote no samples"


def split(
    segments: Sequence[tuple[Path, float]], run_dir: Path, cwd: str | None = None
) -> dict[int, tuple[str, int]]:
    """Write one trace per process of py-spy's whole-tree traces: ``{pid: (file, events)}``.

    ``segments`` are the recordings of one tree, each a trace and the monotonic time it was
    started: their events are joined in one trace per process, each segment's times moved to
    the first's clock (a process's frames are all closed at the end of a segment, so the time
    between two is no stack, as a pause in sampling is).

    py-spy roots each stack of a subprocess in ``process N:"cmd"`` frames: dropped, so the
    stacks read as `trainprof run`'s do. A relative file name (a script started as ``python
    train.py``) is made absolute against that process's working directory, so its lines can
    be read and named from anywhere (workers share their parent's ``cwd``)."""
    joined: dict[int, list[dict[str, Any]]] = {}
    for raw, started in segments:
        shift = (started - segments[0][1]) * 1e6
        for pid, evs in untangle(_events(raw), cwd).items():
            joined.setdefault(pid, []).extend(_shifted(evs, shift) if shift else evs)
    out: dict[int, tuple[str, int]] = {}
    for pid, evs in joined.items():
        packed = write_packed(run_dir / stacks_file(pid), json.dumps(evs, separators=(",", ":")))
        out[pid] = (packed.name, len(evs))
    return out


def _events(raw: Path) -> list[Any]:
    """A py-spy trace's events; none from a missing or damaged file."""
    try:
        with open(raw, encoding="utf-8", errors="replace") as f:
            data = json.load(f)
    except (OSError, ValueError, RecursionError):
        return []
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    return events if isinstance(events, list) else []


def _shifted(events: list[dict[str, Any]], shift_us: float) -> list[dict[str, Any]]:
    return [
        {**ev, "ts": ev["ts"] + shift_us} if isinstance(ev.get("ts"), (int, float)) else ev
        for ev in events
    ]


def untangle(events: list[Any], cwd: str | None = None) -> dict[int, list[dict[str, Any]]]:
    """Each process's own begin/end events, from py-spy's trace of a process tree.

    py-spy writes a thread's begin/end events as the difference between its stack and the
    previous stack it saw of that thread id, whichever process that stack was of. A forked
    child's thread has its parent's thread id (a DataLoader worker's main thread, the job's
    main thread's), so a process's events undo frames of another's stack and leave its own
    open: read as they are, the job's stacks piled up to hundreds of frames, a transformer's
    evaluation forward on top of the worker loop, and its evaluations went unseen. Replayed
    here in py-spy's order, the events give each sample's whole stack; each process's
    events are then written again as the difference between its own consecutive stacks. (A
    sample identical to the thread id's previous stack, of another process, leaves no events:
    that process's stack changes at its next events instead; and a process's stack ends at its
    last events.)"""
    seen: dict[Any, list[dict[str, Any]]] = {}  # thread id: py-spy's previous stack of it
    # (pid, thread id): that process's own stack of it, and the tid and time it was sampled
    own: dict[tuple[int, Any], tuple[list[dict[str, Any]], Any, Any]] = {}
    out: dict[int, list[dict[str, Any]]] = {}
    i = 0
    while i < len(events):
        ev = events[i]
        i += 1
        if not isinstance(ev, dict) or not isinstance(ev.get("pid"), int):
            continue
        pid, tid, ts = ev["pid"], ev.get("tid"), ev.get("ts")
        if ev.get("ph") not in ("B", "E"):
            out.setdefault(pid, []).append(ev)  # metadata (thread names)
            continue
        # one sample: the run of events of one process and thread at one time
        sample = [ev]
        while i < len(events) and _same_sample(events[i], pid, tid, ts):
            sample.append(events[i])
            i += 1
        key = tid_key(tid)
        stack = seen.setdefault(key, [])
        for e in sample:
            if e["ph"] == "B":
                stack.append(_with_path(e, cwd))
            elif stack:
                stack.pop()
        now = [f for f in stack if not _process_frame(f)]
        before = own.get((pid, key), ([], None, None))[0]
        out.setdefault(pid, []).extend(_difference(before, now, pid, tid, ts))
        own[(pid, key)] = (now, tid, ts)
    # What py-spy closed under another process's pid, or never: closed at the process's last
    # sample (a worker that exited must not look alive to the end; the job's last stack is at
    # most one sample interval short).
    for (pid, _key), (stack, tid, ts) in own.items():
        if stack:
            out.setdefault(pid, []).extend(_difference(stack, [], pid, tid, ts))
    return out


def _same_sample(ev: Any, pid: int, tid: Any, ts: Any) -> bool:
    return (
        isinstance(ev, dict)
        and ev.get("ph") in ("B", "E")
        and ev.get("pid") == pid
        and ev.get("tid") == tid
        and ev.get("ts") == ts
    )


def _process_frame(ev: dict[str, Any]) -> bool:
    args = ev.get("args")
    filename = args.get("filename") if isinstance(args, dict) else None
    return not filename and str(ev.get("name", "")).startswith("process ")


def _with_path(ev: dict[str, Any], cwd: str | None) -> dict[str, Any]:
    """The event with its file name made absolute against ``cwd``."""
    raw_args = ev.get("args")
    args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
    fn = args.get("filename")
    if cwd and isinstance(fn, str) and fn and not os.path.isabs(fn) and not fn.startswith("<"):
        return {**ev, "args": {**args, "filename": os.path.normpath(os.path.join(cwd, fn))}}
    return ev


def _difference(
    before: list[dict[str, Any]], now: list[dict[str, Any]], pid: int, tid: Any, ts: Any
) -> list[dict[str, Any]]:
    """End events for the frames of ``before`` not in ``now`` (innermost first), then begin
    events for the frames of ``now`` not in ``before`` (outermost first)."""
    common = 0
    for a, b in zip(before, now, strict=False):
        if _frame(a) != _frame(b):
            break
        common += 1
    ends = [{**f, "ph": "E", "pid": pid, "tid": tid, "ts": ts} for f in reversed(before[common:])]
    begins = [{**f, "ph": "B", "pid": pid, "tid": tid, "ts": ts} for f in now[common:]]
    return ends + begins


def _frame(ev: dict[str, Any]) -> tuple[Any, Any, Any]:
    args = ev.get("args")
    args = args if isinstance(args, dict) else {}
    return ev.get("name"), args.get("filename"), args.get("line")


def remove(paths: Iterable[Path]) -> None:
    for p in paths:
        with contextlib.suppress(OSError):
            p.unlink()
