"""Trace events on tracks: complete spans nested per track, instants, counters and metadata.

Times are absolute monotonic seconds until placed; a span that would cross another of its track
goes to an overflow lane of its own, so every track nests properly.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from trainprof.store.events import ProcessLog

COUNTER_POINTS = 5_000  # per counter series; beyond, each bucket's peak
MACHINE_PID = 2_147_483_000  # a pid no process has (Linux pids stay below 2**22)

TID_STEPS, TID_PHASES, TID_STACKS, TID_DEVICE = 1, 2, 3, 4
TRACK_NAMES = {
    TID_STEPS: "steps",
    TID_PHASES: "phases, stalls, saves, evals, compiles",
    TID_STACKS: "Python stack (py-spy, main thread)",
    TID_DEVICE: "GPU (device clock, timed steps)",
}
OVERFLOW_TID = 100  # + lane: spans that would cross another span of their track


@dataclass
class Span:
    """A complete event on absolute monotonic seconds, before it is placed on a track."""

    name: str
    t0: float
    t1: float
    cat: str
    args: dict[str, Any] = field(default_factory=dict)


NODE_PID_STRIDE = 1 << 22  # above Linux's largest pid (pid_max ≤ 2^22)


@dataclass
class Trace:
    """The events (absolute times) and the notes that say what was left out or approximated."""

    origin: float
    events: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    base_node: int | None = None  # a merged multi-node run: the node whose samples it keeps

    def pid_of(self, log: ProcessLog) -> int:
        """A process's track id: its pid, or, for a process of another node of a merged run
        (pids repeat across machines), the pid moved into that node's own range."""
        node = log.header.get("node")
        if not isinstance(node, int) or node == self.base_node:
            return log.pid
        return NODE_PID_STRIDE * (node + 1) + log.pid

    def us(self, t: float) -> int:
        return int(round((t - self.origin) * 1e6))

    def meta(self, pid: int, name: str, value: Any, tid: int | None = None) -> None:
        ev: dict[str, Any] = {"name": name, "ph": "M", "ts": 0, "pid": pid, "args": value}
        ev["tid"] = tid if tid is not None else 0
        self.events.append(ev)

    def spans(self, pid: int, tid: int, spans: Iterable[Span]) -> None:
        """Complete events on one track; a span that would cross another goes to an overflow
        lane (its own track), so every track nests properly."""
        lanes: list[list[int]] = []  # per lane: end times of the open spans
        placed = sorted(
            ((self.us(s.t0), self.us(s.t1), s) for s in spans if s.t1 >= s.t0),
            key=lambda x: (x[0], -x[1]),
        )
        for start, end, s in placed:
            lane = 0
            while True:
                if lane == len(lanes):
                    lanes.append([])
                    if lane:
                        tid_l = OVERFLOW_TID + tid * 10 + lane
                        self.meta(
                            pid, "thread_name", {"name": f"{TRACK_NAMES[tid]} ({lane + 1})"}, tid_l
                        )
                        self.meta(pid, "thread_sort_index", {"sort_index": tid * 10 + lane}, tid_l)
                open_ends = lanes[lane]
                while open_ends and open_ends[-1] <= start:
                    open_ends.pop()
                if not open_ends or end <= open_ends[-1]:
                    open_ends.append(end)
                    break
                lane += 1
            ev = {
                "name": s.name,
                "cat": s.cat,
                "ph": "X",
                "ts": start,
                "dur": end - start,
                "pid": pid,
                "tid": tid if lane == 0 else OVERFLOW_TID + tid * 10 + lane,
            }
            if s.args:
                ev["args"] = s.args
            self.events.append(ev)

    def instant(self, pid: int, tid: int, name: str, t: float, args: dict[str, Any]) -> None:
        self.events.append(
            {"name": name, "cat": "phase", "ph": "i", "s": "t", "ts": self.us(t), "pid": pid,
             "tid": tid, "args": args}
        )  # fmt: skip

    def counter(
        self, pid: int, name: str, points: Iterable[tuple[float, float]], series: str
    ) -> None:
        """A counter track; unmeasured points (NaN) are left out, never drawn as 0."""
        pts = [(t, v) for t, v in points if not math.isnan(v) and not math.isnan(t)]
        for t, v in _peaks(pts, COUNTER_POINTS):
            self.events.append(
                {"name": name, "cat": "counter", "ph": "C", "ts": self.us(t), "pid": pid,
                 "tid": 0, "args": {series: round(v, 3)}}
            )  # fmt: skip


def _peaks(pts: list[tuple[float, float]], limit: int) -> list[tuple[float, float]]:
    """At most ``limit`` points: each bucket's highest, so a spike is never smoothed away."""
    if len(pts) <= limit:
        return pts
    size = math.ceil(len(pts) / limit)
    return [max(pts[i : i + size], key=lambda p: p[1]) for i in range(0, len(pts), size)]
