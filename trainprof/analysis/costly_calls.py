"""Calls known to cost a training loop time, read from ``costly_calls.json``: what each one
costs and its fix, found on the hot line a finding names."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources

from trainprof.analysis.attribution import user_frame
from trainprof.store.stacks import Frame, StackSpan

MAX_QUOTE = 100  # characters of a hot line quoted in a finding
MAX_SPANS = 20_000  # stack spans read to find the calls below a hot line


@dataclass(frozen=True)
class CostlyCall:
    """One row of the table: the call, how to recognise it, why it costs, and its fix."""

    call: str
    example: str  # a line of code that makes the call
    match: tuple[re.Pattern[str], ...]  # on the hot line's source text
    frames: tuple[str, ...]  # "file suffix:function" of a frame below the hot line
    why: str
    fix: str


@cache
def table() -> tuple[CostlyCall, ...]:
    """The table, in its file's order: the more specific rows first."""
    text = resources.files("trainprof.analysis").joinpath("costly_calls.json").read_text("utf-8")
    return tuple(
        CostlyCall(
            row["call"],
            row["example"],
            tuple(re.compile(p) for p in row.get("match", ())),
            tuple(row.get("frames", ())),
            row["why"],
            row["fix"],
        )
        for row in json.loads(text)
    )


def identify(text: str, below: Iterable[Frame] = ()) -> CostlyCall | None:
    """The row whose pattern matches ``text``, else whose frame is among ``below``."""
    for row in table():
        if any(p.search(text) for p in row.match):
            return row
    called = {f"{path.replace(chr(92), '/')}:{name}" for name, path, _line in below}
    for row in table():
        if any(c.endswith(f) or f"/{f}" in c for f in row.frames for c in called):
            return row
    return None


@dataclass(frozen=True)
class HotLine:
    """The line a finding names, its source text, and the known costly call it makes."""

    frame: Frame
    text: str  # "" where the source was not read
    call: CostlyCall | None

    @property
    def quoted(self) -> str:
        text = self.text if len(self.text) <= MAX_QUOTE else self.text[: MAX_QUOTE - 1] + "…"
        return f"`{text}`" if text else f"line {self.frame[2]}"

    @property
    def evidence(self) -> str:
        at = f"{self.frame[1]}:{self.frame[2]}"
        if self.call is None:
            return f"the hot line, {at}, is {self.quoted}"
        return f"the hot line, {at}, is {self.quoted}: {self.call.call}, {self.call.why}"

    def fix(self, or_else: str) -> str:
        """The call's own fix; for a call not in the table, ``or_else`` about the line."""
        return self.call.fix if self.call is not None else or_else


def hot_line(
    frame: Frame | None, source: Mapping[tuple[str, int], str], spans: Iterable[StackSpan] = ()
) -> HotLine | None:
    """``frame``'s line with its text and the costly call it makes (by its text, else by the
    functions the stacks show below it)."""
    if frame is None:
        return None
    text = " ".join(source.get((frame[1], frame[2]), "").split())
    below: Counter[Frame] = Counter()
    for i, s in enumerate(spans):
        if i >= MAX_SPANS:
            break
        if frame in s.frames:
            below.update(s.frames[s.frames.index(frame) + 1 :])
    return HotLine(frame, text, identify(text, below))


def hottest_line(
    spans: Iterable[StackSpan],
    source: Mapping[tuple[str, int], str],
    keep: Callable[[tuple[Frame, ...]], bool],
) -> HotLine | None:
    """The user's line that held the kept stacks longest (their innermost user frame), with
    its text and the costly call it makes; None without such stacks."""
    kept = [s for s in spans if keep(s.frames)]
    lines: Counter[Frame] = Counter()
    for s in kept:
        frame = user_frame(s.frames)
        if frame is not None:
            lines[frame] += int((s.t1 - s.t0) * 1e6)
    if not lines:
        return None
    return hot_line(lines.most_common(1)[0][0], source, kept)
