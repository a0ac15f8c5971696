"""User and job text on the terminal: always literal, never markup, never raw control bytes.

A command line, a path, an exception message or a finding's evidence can hold anything: `[`
(Hydra overrides, ``split[train]``), ESC sequences, a carriage return. Each goes into rich as
a ``Text`` (never parsed as markup), with control characters shown as escapes (``\\x1b``), and
folds at the width instead of being cut with an ellipsis.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable

from rich.console import Console
from rich.text import Text

from trainprof.store.redact import redact_text

# C0 and C1 controls, DEL, the bidi overrides that reorder what a terminal shows, and lone
# surrogates: bytes that were not UTF-8 (an argument, a path), as Python decodes them
# (surrogateescape), which no UTF-8 writer accepts.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(m: re.Match[str]) -> str:
    c = m.group()
    if c in _NAMED:
        return _NAMED[c]
    code = ord(c)
    if 0xDC80 <= code <= 0xDCFF:  # the byte surrogateescape stood for
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(text: object) -> str:
    """The text, known secrets masked, every control character and undecodable byte written as
    a visible escape (``\\x1b``, ``\\xe9``)."""
    return _CONTROL.sub(_escape, redact_text(str(text)))


def unbyte(text: object) -> str:
    """The text, known secrets masked, each undecodable byte written ``\\xNN``: valid UTF-8, for
    formats that escape control characters their own way."""
    return _SURROGATE.sub(_escape, redact_text(str(text)))


def literal(text: object, style: str = "") -> Text:
    """A rich Text that shows exactly ``text`` (escaped controls), wrapping rather than cropping."""
    return Text(clean(text), style=style, overflow="fold")


def shell_quote(arg: str) -> str:
    """Quote for a POSIX shell; an argument with control characters gets bash's $'...' form, so
    the line still pastes back as the same command."""
    if not _CONTROL.search(arg):
        return shlex.quote(arg)
    body = arg.replace("\\", "\\\\").replace("'", "\\'")
    return "$'" + _CONTROL.sub(_escape, body) + "'"


def shell_join(args: Iterable[str]) -> str:
    return " ".join(shell_quote(a) for a in args)


_forced_plain = False  # `trainprof --no-color`: for trainprof's output only, not the job's


def force_no_color() -> None:
    global _forced_plain
    _forced_plain = True


def no_color() -> bool:
    """NO_COLOR (https://no-color.org): set and not empty turns every style off; so does
    ``trainprof --no-color``."""
    return _forced_plain or os.environ.get("NO_COLOR", "") != ""


def make_console(stderr: bool = False) -> Console:
    """The console every command prints to: no styling at all under NO_COLOR (rich alone
    would drop colours but keep bold and dim), and no guessing of markup or highlights."""
    return Console(
        stderr=stderr,
        color_system=None if no_color() else "auto",
        highlight=False,
        markup=False,
        emoji=False,
    )
