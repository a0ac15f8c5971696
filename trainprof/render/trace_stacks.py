"""The ``Python stack`` track: py-spy's samples of the main thread and other ranks, as flames."""

from __future__ import annotations

from collections.abc import Sequence

from trainprof.analysis import attribution
from trainprof.analysis.metrics import Metrics
from trainprof.render.trace_events import TID_STACKS, Trace
from trainprof.store.events import ProcessLog
from trainprof.store.session import Session
from trainprof.store.stacks import Frame, StackSpan

STACK_EVENTS = 120_000  # frames (a B/E pair, ~340 bytes); beyond, only those inside anomalies
OTHER_RANK_STACK_EVENTS = 30_000  # each other rank's (sampled at 20 Hz): its first frames


def stacks(trace: Trace, pid: int, spans: Sequence[StackSpan], m: Metrics) -> None:
    """py-spy's samples as a flame chart: a frame is one span for as long as it stays on the
    stack, as begin/end pairs (the way py-spy's own trace draws it). Not complete events: a
    frame and its callee often share both ends, and only the order of B/E events tells every
    viewer which is the parent."""
    if not spans:
        return
    ops = _flame(spans)
    if len(ops) > 2 * STACK_EVENTS:
        a = m.activity
        windows = [(st.t0, st.t1) for st in a.stalls]
        windows += [(g.t0, g.t1) for g, _b, _p in a.saves] + [(g.t0, g.t1) for g in a.evals]
        inside = [sp for sp, _s in attribution.overlaps(spans, windows)]
        ops = _flame(_first_frames(inside, STACK_EVENTS))
        trace.notes.append(
            "Python stacks: only the samples inside stalls, saves and evaluations are kept "
            f"(the whole run has more than {STACK_EVENTS} stack spans)"
        )
    _emit_flame(trace, pid, ops)


def _emit_flame(trace: Trace, pid: int, ops: list[tuple[str, float, Frame]]) -> None:
    for op, t, (name, path, line) in ops:
        # An end names its frame too, as py-spy writes it: some viewers match B and E by name.
        trace.events.append(
            {"name": name, "cat": "stack", "ph": op, "ts": trace.us(t), "pid": pid,
             "tid": TID_STACKS, "args": {"file": path, "line": line}}
        )  # fmt: skip


def other_ranks_stacks(trace: Trace, session: Session, primary: ProcessLog | None) -> None:
    """Every other rank's own py-spy samples under its steps (a straggler's work shows there),
    each kept to its first OTHER_RANK_STACK_EVENTS frames so that many ranks stay a small file."""
    logs = {
        p.header.get("rank"): p
        for p in session.processes
        if p.role == "rank" and p.n_steps and p is not primary
    }
    for rank, spans in sorted(session.rank_spans.items()):
        log = logs.get(rank)
        if log is None or not spans:
            continue
        kept = _first_frames(spans, OTHER_RANK_STACK_EVENTS)
        if len(kept) < len(spans):
            trace.notes.append(
                f"rank {rank}'s Python stacks: the first {len(kept)} of {len(spans)} samples kept"
            )
        _emit_flame(trace, trace.pid_of(log), _flame(kept))


def _first_frames(spans: list[StackSpan], limit: int) -> list[StackSpan]:
    """The leading spans whose frames add up to about ``limit`` (a bound on the file)."""
    total = 0
    for i, sp in enumerate(spans):
        total += len(sp.frames)
        if total > limit:
            return spans[:i]
    return spans


def _flame(spans: Sequence[StackSpan]) -> list[tuple[str, float, Frame]]:
    """("B" | "E", time, frame) in order: frames that stay on the stack across consecutive
    samples stay open; an end closes the innermost frame first."""
    out: list[tuple[str, float, Frame]] = []
    open_: list[Frame] = []
    last_end: float | None = None

    def close(keep: int, t: float) -> None:
        while len(open_) > keep:
            out.append(("E", t, open_.pop()))

    for sp in spans:
        if last_end is not None and sp.t0 > last_end + 1e-6:
            close(0, last_end)  # a gap: nothing was sampled in between
        common = 0
        for frame, new in zip(open_, sp.frames, strict=False):
            if frame != new:
                break
            common += 1
        close(common, sp.t0)
        for frame in sp.frames[common:]:
            open_.append(frame)
            out.append(("B", sp.t0, frame))
        last_end = sp.t1
    if last_end is not None:
        close(0, last_end)
    return out
