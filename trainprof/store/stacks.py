"""Stack samples (py-spy's Chrome trace) → main-thread intervals in monotonic time.

Each interval is a span during which the main thread's Python stack stayed the same:
``(t_start, t_end, frames)`` with frames outermost first, each ``(function, file, line)``.
The main thread is the busiest thread that ran a ``<module>`` frame (the script itself).

A finished trace is kept gzipped (``stacks-N.json.gz``): py-spy's trace repeats each frame's
file and name in every event and shrinks about 30-fold, which keeps a day of them within the
run directory's disk budget.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import math
import os
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

Frame = tuple[str, str, int]


@dataclass(frozen=True)
class StackSpan:
    t0: float
    t1: float
    frames: tuple[Frame, ...]


GZ = ".gz"


def pack(path: Path) -> Path | None:
    """Gzip a finished trace beside it and delete the original: the packed file, or None where
    it could not be written (the original is kept then)."""
    packed = path.with_name(path.name + GZ)
    try:
        with open(path, "rb") as src:
            _write_gz(packed, iter(lambda: src.read(1 << 20), b""))
    except OSError:
        return None
    with contextlib.suppress(OSError):
        path.unlink()
    return packed


def write_packed(path: Path, text: str) -> Path:
    """Write a trace gzipped, as ``path`` + ``.gz`` (OSError where it cannot be written)."""
    packed = path.with_name(path.name + GZ)
    _write_gz(packed, [text.encode("utf-8", errors="replace")])
    return packed


def _write_gz(packed: Path, blocks: Iterable[bytes]) -> None:
    """Private (0600, as every run file), and under its name only once it is whole."""
    partial = packed.with_name(packed.name + ".part")
    try:
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as raw:
            with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as out:
                for block in blocks:
                    out.write(block)
        os.replace(partial, packed)
    except OSError:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise


def load_spans(path: Path, started_at: float) -> list[StackSpan]:
    # A chunk listed before it was packed (the runner stopped between the two) is read packed.
    if not path.exists() and path.with_name(path.name + GZ).exists():
        path = path.with_name(path.name + GZ)
    try:
        with _open_trace(path) as f:
            events = json.load(f)
    # a torn or damaged trace (a cut gzip stream is EOFError): no stacks, never a traceback
    except (OSError, ValueError, EOFError, zlib.error, RecursionError):
        return []
    if isinstance(events, dict):
        events = events.get("traceEvents", [])
    if not isinstance(events, list):
        return []
    by_tid: dict[Any, list[dict[str, Any]]] = {}
    for ev in events:
        if isinstance(ev, dict) and ev.get("ph") in ("B", "E") and _valid(ev):
            by_tid.setdefault(tid_key(ev.get("tid")), []).append(ev)
    main = _main_thread(by_tid)
    return _spans(by_tid.get(main, []), started_at) if main is not None else []


def _open_trace(path: Path) -> IO[str]:
    if path.name.endswith(GZ):
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def _valid(ev: dict[str, Any]) -> bool:
    """An event whose time, name and place read as py-spy writes them."""
    ts, args = ev.get("ts", 0), ev.get("args") or {}
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts):
        return False
    if not isinstance(args, dict):
        return False
    line = args.get("line", 0) or 0
    return isinstance(line, int) and not isinstance(line, bool) and -(2**31) < line < 2**31


def tid_key(tid: Any) -> Any:
    """A trace event's thread id as a dict key (a damaged file may hold any JSON there)."""
    return tid if isinstance(tid, (int, str, float, type(None))) else repr(tid)


def _main_thread(by_tid: dict[Any, list[dict[str, Any]]]) -> Any:
    """The thread that ran a module body (the script), and of those the busiest. Its first
    events may belong to start-up imports, so any ``<module>`` frame counts, not just the first."""
    best, best_n = None, -1
    for tid, evs in by_tid.items():
        if len(evs) > best_n and any(e.get("name") == "<module>" for e in evs):
            best, best_n = tid, len(evs)
    return best


def _spans(events: list[dict[str, Any]], started_at: float) -> list[StackSpan]:
    spans: list[StackSpan] = []
    stack: list[Frame] = []
    last_t: float | None = None
    # Interned: a long run repeats the same few hundred frames and stacks millions of times.
    frames_seen: dict[Frame, Frame] = {}
    stacks_seen: dict[tuple[Frame, ...], tuple[Frame, ...]] = {}
    for ev in sorted(events, key=lambda e: e.get("ts", 0)):  # stable: B/E order kept per ts
        t = started_at + float(ev.get("ts", 0)) / 1e6
        if last_t is not None and t > last_t and stack:
            key = tuple(stack)
            spans.append(StackSpan(last_t, t, stacks_seen.setdefault(key, key)))
        last_t = t
        args = ev.get("args") or {}
        frame = (str(ev.get("name")), str(args.get("filename", "")), int(args.get("line", 0) or 0))
        frame = frames_seen.setdefault(frame, frame)
        if ev["ph"] == "B":
            stack.append(frame)
        elif stack:
            stack.pop()
    return spans
