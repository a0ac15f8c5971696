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

from rich.cells import cell_len, chop_cells
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
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


class ShellLine:
    """A command line quoted for a shell, broken only between its words, never inside one.

    Each broken line ends in `` \\``, so the lines paste back as one command; a word wider
    than the width folds by characters."""

    CONTINUED = " \\"

    def __init__(self, args: Iterable[str], style: str = "") -> None:
        self.words = [clean(shell_quote(a)) for a in args]
        self.style = style

    def lines(self, width: int) -> list[str]:
        """The words on lines of at most width cells, the continuation mark counted."""
        whole = " ".join(self.words)
        if cell_len(whole) <= width:
            return [whole]
        lines: list[str] = []
        for word in self.words:
            if lines and cell_len(f"{lines[-1]} {word}") + len(self.CONTINUED) <= width:
                lines[-1] += f" {word}"
            else:
                lines.append(word)
        marked = [line + self.CONTINUED for line in lines[:-1]] + lines[-1:]
        return [piece for line in marked for piece in chop_cells(line, max(width, 1))]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        text = "\n".join(self.lines(options.max_width))
        yield Text(text, style=self.style, no_wrap=True, overflow="crop")

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        widest = max((cell_len(w) for w in self.words), default=0) + len(self.CONTINUED)
        whole = cell_len(" ".join(self.words))
        return Measurement(min(widest, whole), whole).clamp(max_width=options.max_width)


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
