"""Take the probe's own frames out of a traceback before it is printed.

The probe wraps a few torch functions (DataLoader ``__next__``, dataset fetch), so an error
raised beneath them passes through a trainprof frame. Without this, the job's traceback would
show lines it never shows without trainprof. Frames are dropped from the traceback chain (also
of chained exceptions), and from the text of DataLoader worker tracebacks, which torch formats
in the worker and carries as the exception message.
"""

from __future__ import annotations

import os
import re
from types import TracebackType

PROBE_DIR = os.path.dirname(os.path.abspath(__file__))
_FRAME_LINE = re.compile(r'^\s*File "([^"]+)", line \d+, in ')


def without_probe_frames(exc: BaseException, tb: TracebackType | None) -> TracebackType | None:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        current.__traceback__ = _strip(current.__traceback__)
        _strip_message(current)
        current = current.__cause__ or current.__context__
    return _strip(tb)


def _strip(tb: TracebackType | None) -> TracebackType | None:
    entries = []
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(PROBE_DIR):
            entries.append(tb)
        tb = tb.tb_next
    head = None
    for entry in reversed(entries):
        entry.tb_next = head
        head = entry
    return head


def _strip_message(exc: BaseException) -> None:
    """A worker's traceback arrives as text inside the message: drop the probe's frames there."""
    if len(exc.args) != 1 or not isinstance(exc.args[0], str) or PROBE_DIR not in exc.args[0]:
        return
    out: list[str] = []
    skipping = False
    for line in exc.args[0].split("\n"):
        m = _FRAME_LINE.match(line)
        if m:
            skipping = m.group(1).startswith(PROBE_DIR)
        elif skipping and not line.startswith("    "):
            skipping = False
        if not skipping:
            out.append(line)
    exc.args = ("\n".join(out),)
