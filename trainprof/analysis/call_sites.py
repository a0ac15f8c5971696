"""Where the training loop calls the code a finding is about, and that code's hot line: the
call site a finding names."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from trainprof.analysis.attribution import (
    categoriser,
    is_user_file,
    named,
    overlaps,
    short_name,
    user_frame,
)
from trainprof.store.stacks import Frame, StackSpan


@dataclass(frozen=True)
class CallSite:
    """Where the training loop calls the code that held the main thread, and its hot line."""

    call: Frame  # the loop's frame: its line is the call
    callee: str | None  # the user function called there (``validate``); None: the line itself
    hot: Frame | None  # the innermost user line that took longest

    @property
    def where(self) -> str:
        at = f"{self.call[1]}:{self.call[2]}"
        if self.callee is None:
            return f"{at} ({short_name(self.call[0])})"
        return f"{at} ({short_name(self.call[0])} → {short_name(self.callee)}())"

    @property
    def called(self) -> str:
        """What the loop calls there, for a sentence: ``validate()`` or ``the code at line 88``."""
        if self.callee is None:
            return f"the code on line {self.call[2]}"
        return f"{short_name(self.callee)}()"

    @property
    def sentence(self) -> str:
        """Where the loop runs it, as evidence."""
        at = f"{self.call[1]}:{self.call[2]}"
        if self.callee is None:
            return f"it runs in the training loop itself, at {at}"
        return f"the loop calls {self.called} at {at}"

    @property
    def hot_where(self) -> str | None:
        if self.hot is None:
            return None
        return f"{self.hot[1]}:{self.hot[2]} ({enclosing(self.hot[0])})"

    @property
    def work(self) -> str:
        """The function that does the work, for a fix: the hot line's enclosing function."""
        if self.hot is not None:
            return f"{enclosing(self.hot[0])}()"
        return self.called


def enclosing(qualname: str) -> str:
    """``search.<locals>.<genexpr>`` → ``search``: the function a reader can find, unqualified."""
    return short_name(named(qualname))


_WRAPPER_FILES = re.compile(r"(?:torch/utils/_contextlib|/contextlib|/functools)\.py$")
# A stall's window holds its step's own forward, backward and optimizer step too: code called
# from another loop line names the stall when it holds this share of the window's loop calls.
OTHER_CALL_SHARE = 0.25
_STEP_WORK = ("forward", "backward", "optimizer")


def _loop_frame(frames: tuple[Frame, ...], loop_funcs: frozenset[tuple[str, str]]) -> int | None:
    """The index of the innermost frame of a loop function, or None."""
    for i in range(len(frames) - 1, -1, -1):
        if (frames[i][0], frames[i][1]) in loop_funcs:
            return i
    return None


def step_lines(
    spans: Iterable[StackSpan],
    source: dict[tuple[str, int], str],
    loop_funcs: frozenset[tuple[str, str]],
) -> frozenset[Frame]:
    """The loop lines ordinary steps run their forward, backward and optimizer step from (the
    innermost loop-function frame of those stacks), read from stacks outside stalls."""
    out: set[Frame] = set()
    category_of = categoriser(source)
    for s in spans:
        if category_of(s.frames) in _STEP_WORK:
            i = _loop_frame(s.frames, loop_funcs)
            if i is not None:
                out.add(s.frames[i])
    return frozenset(out)


def call_site(
    spans: Sequence[StackSpan],
    windows: Iterable[tuple[float, float]],
    loop_funcs: frozenset[tuple[str, str]],
    step_lines: frozenset[Frame] = frozenset(),
) -> CallSite | None:
    """The loop line (and callee) that held the main thread longest inside the windows: in each
    stack, the innermost frame of a loop function, and the frame it calls. A line that
    ordinary steps run (``step_lines``: the forward, backward, optimizer calls) yields to
    another line holding ``OTHER_CALL_SHARE`` of the time: py-spy once held a step's forward
    stack across most of a 0.2 s pseudo-label refresh, and the stall was named after the
    forward line. The hot line is the innermost user line under the call named."""
    calls: Counter[tuple[Frame, str]] = Counter()
    hot: dict[tuple[Frame, str], Counter[Frame]] = {}
    for s, seconds in overlaps(spans, windows):
        weight = int(seconds * 1e6)
        i = _loop_frame(s.frames, loop_funcs)
        if i is None:
            continue
        f = s.frames[i]
        # A comprehension or lambda in the loop is the loop's own code: name what it calls.
        # A library call made on the loop's line (model(x), requests.post) is the loop's
        # own work at that line.
        # A decorator's wrapper (@torch.no_grad(), functools.wraps) between them is not a call
        # of the loop's: the function it wraps is (a validate() under @torch.no_grad()).
        named = [
            g
            for g in s.frames[i + 1 :]
            if not short_name(g[0]).startswith("<") and not _WRAPPER_FILES.search(g[1])
        ]
        inline = not named or not is_user_file(named[0][1])
        key = (f, "<inline>" if inline else named[0][0])
        calls[key] += weight
        uf = user_frame(s.frames)
        if uf is not None:
            hot.setdefault(key, Counter())[uf] += weight
    if not calls:
        return None
    others = Counter({k: w for k, w in calls.items() if k[0] not in step_lines})
    pool = others if others.total() >= OTHER_CALL_SHARE * calls.total() else calls
    (frame, callee), _n = pool.most_common(1)[0]
    lines = hot.get((frame, callee))
    top = lines.most_common(1)[0][0] if lines else None
    if callee == "<inline>":
        return CallSite(frame, None, top if top != frame else None)
    return CallSite(frame, callee, top)
