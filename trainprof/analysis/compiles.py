"""torch.compile's compiles as the probe timed them (probe/compiles.py): when each ran, what
started it, the line of the job it ran under, and what Dynamo said of each recompile.

Pure: reads a process's info records. Times are monotonic seconds, as every window and
segment of the analysis.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from trainprof.analysis.stalls import Stall
from trainprof.store.events import ProcessLog
from trainprof.store.stacks import Frame

# Dynamo's reason for a shape guard that failed: "tensor 'x' size mismatch at index 1.
# expected 64, actual 62" (the name is the argument's: args[0] for a compiled module's input).
SIZE_MISMATCH = re.compile(
    r"tensor '(?P<name>[^']+)' size mismatch at index (?P<dim>\d+)\. "
    r"expected (?P<expected>\d+), actual (?P<actual>\d+)"
)


@dataclass(frozen=True)
class Compile:
    t0: float
    t1: float
    trigger: str | None  # "DYNAMO" (a frame traced), "LAZY_BACKWARD" (its backward, at first run)
    compile_id: str | None  # Dynamo's "frame/attempt", e.g. "0/3": the fourth graph of frame 0
    where: Frame | None  # (function, file, line) of the job's code it ran under

    @property
    def seconds(self) -> float:
        return self.t1 - self.t0


@dataclass(frozen=True)
class Recompile:
    compile_id: str
    reason: str  # the guard that failed, as Dynamo words it ("0/2: tensor 'x' size mismatch …")
    gave_up: bool  # Dynamo hit its recompile limit here: the frame runs uncompiled from now on


@dataclass(frozen=True)
class CompileLog:
    compiles: tuple[Compile, ...]
    recompiles: tuple[Recompile, ...]
    breaks: tuple[Frame, ...] = ()  # (function, file, line) of each graph break, once each
    # Dynamo's reasons for its graph breaks: its first line, and its explanation in brackets
    break_reasons: tuple[str, ...] = ()

    def within(self, t0: float, t1: float) -> tuple[Compile, ...]:
        """The compiles that started inside [t0, t1)."""
        return tuple(c for c in self.compiles if t0 <= c.t0 < t1)

    def seconds_before(self, t: float) -> float:
        return sum(min(c.t1, t) - c.t0 for c in self.compiles if c.t0 < t)

    @property
    def gave_up(self) -> Recompile | None:
        return next((r for r in self.recompiles if r.gave_up), None)

    @property
    def segments(self) -> list[tuple[float, float]]:
        return [(c.t0, c.t1) for c in self.compiles]


def read(log: ProcessLog) -> CompileLog | None:
    """The process's compiles; None where the probe saw none (the job does not compile, or its
    torch has no compile callbacks)."""
    compiles, recompiles, breaks, reasons = [], [], [], []
    for info in log.infos:
        if isinstance(c := info.get("compile"), dict):
            compile_ = _compile(log.t0, c)
            if compile_ is not None:
                compiles.append(compile_)
        elif isinstance(r := info.get("recompile"), dict):
            recompiles.append(
                Recompile(
                    str(r.get("id") or ""), str(r.get("reason") or ""), r.get("gave_up") is True
                )
            )
        elif isinstance(b := info.get("graph_break"), dict):
            file, line = b.get("file"), b.get("line")
            if isinstance(file, str) and isinstance(line, int) and not isinstance(line, bool):
                breaks.append((str(b.get("function") or "?"), file, line))
        elif isinstance(g := info.get("graph_break_reason"), dict) and g.get("reason"):
            detail = g.get("detail")
            reasons.append(f"{g['reason']} ({detail})" if detail else str(g["reason"]))
    if not (compiles or recompiles or breaks):
        return None
    return CompileLog(
        tuple(sorted(compiles, key=lambda c: c.t0)),
        tuple(recompiles),
        tuple(breaks),
        tuple(reasons),
    )


def _compile(t0: float, c: dict[str, Any]) -> Compile | None:
    a, b = c.get("t0"), c.get("t1")
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in (a, b)):
        return None
    assert isinstance(a, int) and isinstance(b, int)
    if b < a:
        return None
    start, end = t0 + a / 1e6, t0 + b / 1e6
    if not (math.isfinite(start) and math.isfinite(end)):
        return None
    file, line, func = c.get("file"), c.get("line"), c.get("function")
    where: Frame | None = None
    if isinstance(file, str) and isinstance(line, int) and not isinstance(line, bool):
        where = (str(func or "?"), file, line)
    trigger, cid = c.get("trigger"), c.get("id")
    return Compile(
        start,
        end,
        trigger if isinstance(trigger, str) else None,
        cid if isinstance(cid, str) else None,
        where,
    )


# A stall is a compile when compiles the probe timed cover at least this share of its excess.
COMPILE_COVER = 0.5


def label_stalls(stalls: Sequence[Stall], log: CompileLog) -> list[Stall]:
    """Stalls the stacks took for host work (or had no stacks to judge) that the probe saw
    compiling through: torch.compile's, whatever the stack samples caught."""
    out = []
    for st in stalls:
        if st.cause in ("cpu", "blocked", "sync", "logging") and st.excess_s > 0:
            a = st.t1 - st.excess_s
            inside = sum(max(0.0, min(c.t1, st.t1) - max(c.t0, a)) for c in log.compiles)
            if inside >= COMPILE_COVER * st.excess_s:
                st = replace(st, cause="compile")
        out.append(st)
    return out


def traced(compiles: Iterable[Compile]) -> list[Compile]:
    """The compiles of a traced frame (a graph each), not the backward compiled at its first
    run; all of them on a torch that does not say which is which."""
    return [c for c in compiles if c.trigger in (None, "DYNAMO")]
