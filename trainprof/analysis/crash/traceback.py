"""A failed job's stderr read as tracebacks: blocks, frames, and the worker tracebacks that torch
re-raises in the main process, so a row can tell where a line was raised."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from trainprof.analysis.usercode import is_user_path

_MAX_CHARS = 16_000_000  # beyond this keep the head and (mostly) the tail: crashes end the log
_HEAD_CHARS = 1_000_000
_MAX_LINE = 4_000  # regexes only ever see this much of one line
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_RANK_PREFIX = re.compile(r"^\[(?:rank|default)\d+\]: ?")  # torchrun / torchelastic line prefixes
_HEADER = "Traceback (most recent call last):"
_OLD_WRAP = re.compile(r"^[A-Za-z_][\w.]*: Traceback \(most recent call last\):$")
_CAUGHT = re.compile(r"Caught \w+ in DataLoader worker process (\d+)\.")
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>.+?)\s*$')
_CARETS = re.compile(r"^[\s~^]+$")


@dataclass(frozen=True)
class Frame:
    path: str
    line: int
    func: str
    code: str  # the first source line printed under the frame, "" when none was printed

    @property
    def is_user(self) -> bool:
        return is_user_path(self.path)

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class Block:
    """One ``Traceback (most recent call last):`` and what follows it."""

    header: int  # line index of the header
    exc: int | None  # line index of the exception line; None when the block is cut short
    end: int  # one past the last line of the exception message
    frames: tuple[Frame, ...]  # outermost first, as printed
    worker: int | None  # DataLoader worker id of a worker traceback re-raised by the main process
    wrapped: bool  # the block is a worker's original traceback (new or pre-1.2 wrapping)
    parent: int | None  # index of the block that re-raised this one
    preamble: str  # the line printed before the header, e.g. "Exception ignored in: ..."


@dataclass(frozen=True)
class Doc:
    lines: tuple[str, ...]
    blocks: tuple[Block, ...]
    owner: Mapping[int, int]  # line index -> index of the block whose exception message holds it


def _normalise(text: object) -> tuple[str, ...]:
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8", errors="replace")
    if not isinstance(text, str):
        return ()
    if len(text) > _MAX_CHARS:
        text = text[:_HEAD_CHARS] + "\n" + text[-(_MAX_CHARS - _HEAD_CHARS) :]
    text = _ANSI.sub("", text.replace("\x00", ""))
    return tuple(_RANK_PREFIX.sub("", line)[:_MAX_LINE] for line in text.splitlines())


def _is_header(line: str) -> bool:
    return line.rstrip().endswith(_HEADER)


def parse(text: object) -> Doc:
    lines = _normalise(text)
    n = len(lines)
    blocks: list[Block] = []
    owner: dict[int, int] = {}
    i = 0
    while i < n:
        line = lines[i].rstrip()
        if not line.endswith(_HEADER):
            i += 1
            continue
        worker: int | None = None
        wrapped = False
        parent: int | None = None
        stripped = line.strip()
        if stripped.startswith("Original " + _HEADER):
            wrapped = True
            if i > 0:
                caught = _CAUGHT.search(lines[i - 1])
                worker = int(caught.group(1)) if caught else None
            parent = owner.get(i - 1)
        elif _OLD_WRAP.match(stripped):
            wrapped = True
            parent = owner.get(i)
        preamble = lines[i - 1].strip() if i > 0 else ""
        frames: list[Frame] = []
        exc: int | None = None
        j = i + 1
        while j < n:
            cur = lines[j]
            m = _FRAME.match(cur)
            if m:
                frames.append(Frame(m["path"], int(m["line"]), m["func"], ""))
            elif not cur.strip():
                break  # a blank line before any exception line: the block was cut short
            elif cur[:1] in (" ", "\t"):
                if frames and not frames[-1].code and not _CARETS.match(cur):
                    last = frames[-1]
                    frames[-1] = Frame(last.path, last.line, last.func, cur.strip())
            else:
                exc = j
                break
            j += 1
        end = j
        if exc is not None:
            end = exc + 1
            if not _is_header(lines[exc]):
                while (
                    end < n
                    and end - exc < 40
                    and lines[end].strip()
                    and not _is_header(lines[end])
                    and not _FRAME.match(lines[end])
                ):
                    end += 1
        block = Block(i, exc, end, tuple(frames), worker, wrapped, parent, preamble)
        blocks.append(block)
        if exc is not None:
            for k in range(exc, end):
                owner[k] = len(blocks) - 1
        # A pre-1.2 wrapper line ("RuntimeError: Traceback (most recent call last):") is both the
        # exception line of this block and the header of the worker's block: parse it again.
        i = exc if exc is not None and _is_header(lines[exc]) else max(end, i + 1)
    return Doc(lines, tuple(blocks), owner)


def _frames_in(text: object) -> tuple[Frame, ...]:
    found: list[Frame] = []
    for line in _normalise(text):
        m = _FRAME.match(line)
        if m:
            found.append(Frame(m["path"], int(m["line"]), m["func"], ""))
    return tuple(found)


def user_frame(traceback_text: str) -> str | None:
    """``file:line`` of the deepest frame in the text that is the user's own code, else None.

    Deepest means printed last: in a worker-wrapped traceback the worker's frames come after the
    main process's, and in a chain of exceptions the final one comes last. Installed packages,
    the standard library, torch and trainprof are not the user's code.
    """
    try:
        for frame in reversed(_frames_in(traceback_text)):
            if frame.is_user:
                return frame.where
    except Exception:  # never raise on odd input
        return None
    return None
