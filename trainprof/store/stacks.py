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
import io
import json
import math
import os
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from trainprof.store.run_files import open_regular

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


Event = tuple[float, bool, Frame]  # (ts in µs, a "B" event, its frame)
MAX_EVENT_CHARS = 1 << 20  # py-spy writes a few hundred per event; a longer one is damage
READ_CHARS = 1 << 20
_SPACE = " \t\n\r"  # JSON's white space


def load_spans(path: Path, started_at: float) -> list[StackSpan]:
    """A trace's main-thread spans, read as a stream: memory grows with the events kept, never
    with the file (a gzip that expands to gigabytes); a damaged or endless file gives what was
    read before the damage, never a traceback."""
    # A chunk listed before it was packed (the runner stopped between the two) is read packed.
    if not os.path.lexists(path) and os.path.lexists(path.with_name(path.name + GZ)):
        path = path.with_name(path.name + GZ)
    by_tid: dict[Any, list[Event]] = {}
    modules: set[Any] = set()
    frames_seen: dict[Frame, Frame] = {}
    try:
        with _open_trace(path) as f:
            for ev in _stream_events(f):
                if ev.get("ph") in ("B", "E") and _valid(ev):
                    args = ev.get("args") or {}
                    name = str(ev.get("name"))
                    frame = (name, str(args.get("filename", "")), int(args.get("line", 0) or 0))
                    tid = tid_key(ev.get("tid"))
                    event = (
                        float(ev.get("ts", 0)),
                        ev["ph"] == "B",
                        frames_seen.setdefault(frame, frame),
                    )
                    by_tid.setdefault(tid, []).append(event)
                    if name == "<module>":
                        modules.add(tid)
    # a torn or damaged trace (a cut gzip stream is EOFError): what was read, never a traceback
    except (OSError, ValueError, EOFError, zlib.error, RecursionError):
        pass
    main = _main_thread(by_tid, modules)
    return _spans(by_tid.get(main, []), started_at) if main is not None else []


def _open_trace(path: Path) -> IO[str]:
    raw = open_regular(path)
    if path.name.endswith(GZ):
        return io.TextIOWrapper(gzip.GzipFile(fileobj=raw), encoding="utf-8", errors="replace")
    return io.TextIOWrapper(raw, encoding="utf-8", errors="replace")


def _stream_events(f: IO[str]) -> Iterator[dict[str, Any]]:
    """The objects of a trace's event array, one at a time: a JSON array of events (py-spy's),
    or an object whose ``traceEvents`` holds it. Stops at the first damage."""
    reader = _Reader(f)
    opening = reader.next_char()
    if opening == "{":  # {"traceEvents": [...], ...}: find the key, skip other values
        while True:
            key = reader.value()
            if reader.next_char() != ":":
                return
            if key == "traceEvents":
                opening = reader.next_char()
                break
            reader.value()
            if reader.next_char() != ",":
                return
    if opening != "[":
        return
    while True:
        item = reader.value()
        if isinstance(item, dict):
            yield item
        if reader.next_char() != ",":
            return


class _Reader:
    """JSON values read one after another from a text stream, holding at most one value (and
    ``MAX_EVENT_CHARS``) in memory."""

    def __init__(self, f: IO[str]) -> None:
        self._f = f
        self._buf = ""
        self._pos = 0
        self._eof = False
        self._decoder = json.JSONDecoder()

    def _more(self) -> bool:
        if self._eof:
            return False
        chunk = self._f.read(READ_CHARS)
        if not chunk:
            self._eof = True
            return False
        self._buf = self._buf[self._pos :] + chunk
        self._pos = 0
        return True

    def next_char(self) -> str:
        """The next character that is not white space ("" at the end), consumed."""
        while True:
            buf, pos = self._buf, self._pos
            end = min(len(buf), pos + 64)
            while pos < end and buf[pos] in _SPACE:  # a separator's space or two
                pos += 1
            if pos == end and pos < len(buf):  # a long run of space: skip it at C speed
                pos = len(buf) - len(buf[pos:].lstrip(_SPACE))
            if pos < len(buf):
                self._pos = pos + 1
                return buf[pos]
            self._buf, self._pos = "", 0
            if not self._more():
                return ""

    def value(self) -> Any:
        """The next JSON value; ValueError where none can be read within MAX_EVENT_CHARS."""
        if not self.next_char():
            raise ValueError("the trace ends before its last event")
        self._pos -= 1  # the value's first character
        while True:
            try:
                value, end = self._decoder.raw_decode(self._buf, self._pos)
            except json.JSONDecodeError:
                if len(self._buf) - self._pos > MAX_EVENT_CHARS or not self._more():
                    raise ValueError("a damaged or oversized trace event") from None
                continue
            if end == len(self._buf) and not self._eof and self._buf[self._pos] not in '[{"':
                # a number may go on in the next chunk
                if self._more():
                    continue
            self._pos = end
            return value


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


def _main_thread(by_tid: dict[Any, list[Event]], modules: set[Any]) -> Any:
    """The thread that ran a module body (the script), and of those the busiest. Its first
    events may belong to start-up imports, so any ``<module>`` frame counts, not just the first."""
    best, best_n = None, -1
    for tid, evs in by_tid.items():
        if len(evs) > best_n and tid in modules:
            best, best_n = tid, len(evs)
    return best


def _spans(events: list[Event], started_at: float) -> list[StackSpan]:
    spans: list[StackSpan] = []
    stack: list[Frame] = []
    last_t: float | None = None
    # Interned: a long run repeats the same few hundred stacks millions of times.
    stacks_seen: dict[tuple[Frame, ...], tuple[Frame, ...]] = {}
    for ts, begins, frame in sorted(events, key=lambda e: e[0]):  # stable: B/E order per ts
        t = started_at + ts / 1e6
        if last_t is not None and t > last_t and stack:
            key = tuple(stack)
            spans.append(StackSpan(last_t, t, stacks_seen.setdefault(key, key)))
        last_t = t
        if begins:
            stack.append(frame)
        elif stack:
            stack.pop()
    return spans
