"""The HTML report's timeline: the trace's main-process tracks, drawn around the first stalls."""

from __future__ import annotations

import zlib
from typing import Any

from trainprof.analysis.metrics import Metrics
from trainprof.render import svg
from trainprof.render.trace import time_zero
from trainprof.render.trace_events import TID_DEVICE, TID_PHASES, TID_STACKS, TID_STEPS

TIMELINE_DEPTH = 7  # stack frames drawn in the timeline, outermost first


def timeline(m: Metrics, data: dict[str, Any]) -> str:
    """The main process's tracks of the trace over a window around the first stalls."""
    events = data.get("traceEvents", [])
    main = next(
        (e["pid"] for e in events if e.get("ph") == "M" and e.get("name") == "process_sort_index"
         and e["args"].get("sort_index") == 0),
        None,
    )  # fmt: skip
    xs = [e for e in events if e.get("ph") in ("X", "B", "E") and e.get("pid") == main]
    if not xs:
        return svg.message("timeline", "no steps recorded")
    lo, hi = _window(m, data, xs)
    lanes = [
        _lane("stalls, saves, evals", xs, TID_PHASES, lo, hi, 1, skip_cat=("phase",)),
        _lane("steps · data wait", xs, TID_STEPS, lo, hi, 3),
        _lane("Python stack (py-spy)", xs, TID_STACKS, lo, hi, TIMELINE_DEPTH),
    ]
    if any(e.get("tid") == TID_DEVICE for e in xs):
        lanes.append(_lane("GPU (device clock)", xs, TID_DEVICE, lo, hi, 1))
    return svg.timeline("timeline", lanes, lo / 1e6, hi / 1e6, "seconds since launch")


def _window(m: Metrics, data: dict[str, Any], drawn: list[dict[str, Any]]) -> tuple[float, float]:
    """µs range: the first two stalls with some context, else the first second of steady steps,
    else all that is ``drawn`` (a job too short for steps may have stack samples only: their
    begin and end marks, which have no duration)."""
    origin = time_zero(data)
    stalls = m.activity.stalls
    if len(stalls) >= 2:
        a, b = stalls[0].t0, stalls[1].t1
        pad = 0.1 * (b - a)
        lo, hi = a - pad, b + pad
    elif stalls:
        lo, hi = stalls[0].t0 - 0.5, stalls[0].t1 + 0.5
    elif m.activity.window is not None:
        lo = m.activity.window[0]
        hi = min(m.activity.window[1], lo + 1.0)
    else:
        start = min(e["ts"] for e in drawn)
        end = max(e["ts"] + e.get("dur", 0) for e in drawn)
        return start, max(end, start + 1)
    return ((lo - origin) * 1e6, (hi - origin) * 1e6)


def _lane(
    name: str,
    events: list[dict[str, Any]],
    tid: int,
    lo: float,
    hi: float,
    max_depth: int,
    skip_cat: tuple[str, ...] = (),
) -> svg.Lane:
    """A track's spans inside [lo, hi] µs with their nesting depth, from its complete events
    and its begin/end pairs (the events are in the trace's order: sorted, parents first)."""
    lane = svg.Lane(name)
    open_x: list[int] = []  # ends of the complete events that contain the current one
    open_b: list[dict[str, Any]] = []  # begun, not yet ended

    def add(e: dict[str, Any], start: int, end: int, depth: int) -> None:
        if depth < max_depth and end >= lo and start <= hi:
            lane.spans.append((start / 1e6, end / 1e6, str(e["name"]), _span_class(e), depth))
            lane.depth = max(lane.depth, depth + 1)

    for e in events:
        if e.get("tid") != tid or e.get("cat") in skip_cat:
            continue
        if e["ph"] == "B":
            open_b.append(e)
        elif e["ph"] == "E" and open_b:
            begun = open_b.pop()
            add(begun, begun["ts"], e["ts"], len(open_b))
        elif e["ph"] == "X":
            start, end = e["ts"], e["ts"] + e["dur"]
            while open_x and open_x[-1] <= start:
                open_x.pop()
            add(e, start, end, len(open_x))
            open_x.append(end)
    return lane


def _span_class(e: dict[str, Any]) -> str:
    cat = e.get("cat")
    if cat == "stall":
        return f"cause-{e.get('args', {}).get('cause', 'cpu')}"
    if cat == "save":
        return "cause-checkpoint"
    if cat == "eval":
        return "cause-eval"
    if cat == "data":
        return "k-data_wait" if e["name"] == "data wait" else "k-fetch"
    if cat == "stack":
        return f"f{zlib.crc32(str(e['name']).encode()) % 6}"
    if cat == "device":
        return "s3"
    return "k-step"
