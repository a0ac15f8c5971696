"""A stored run as a Chrome Trace Event Format file (JSON), the format Perfetto UI and
``chrome://tracing`` open.

Every source is on one clock: the probe's records are µs since its ``time.monotonic()`` origin,
the sampler's rows carry ``time.monotonic()``, and py-spy's stack samples are µs since py-spy
built its recorder, which the runner notes (``time.monotonic()`` just before starting py-spy);
so stacks lag by at most py-spy's own start-up. Times in the file are whole µs since the
earliest of them (the launch).

Tracks: one process per process of the job (main, ranks, DataLoader workers), and a "machine"
process for what belongs to no process (swap, GPU). In a process with steps:

- ``steps``: every optimizer step, and inside it the step's data wait, split as the ledger
  splits it (sampler; ``__getitem__``/collate/pin at the probe's mean cost per batch when the
  main process loads; worker start-up on an epoch's first batches; the rest). The probe records
  how long a step waited, not when: the wait is drawn at the step's start, where
  ``next(loader)`` runs in a training loop.
- ``phases``: warm-up and the steady window, ``torch.save`` calls, evaluations, epoch starts,
  and every stall, named by its cause and the user function the loop called.
- ``Python stack (py-spy)``: the main thread's stack samples as a flame chart (begin/end
  pairs), under the stalls.
- ``GPU (device clock)``: timed steps' forward/backward/optimizer/idle on the GPU's clock.

Complete (``X``) events, nested properly within each track (a span that would cross another is
moved to a track of its own), begin/end (``B``/``E``) pairs for the stacks, counters (``C``),
instants (``i``) and metadata (``M``), sorted by time (a stable sort: same-time events keep
their order, which is what nests begin/end pairs).

A long run keeps every anomalous step (warm-up, stalls, epoch starts, steps with a save or an
evaluation) and draws the steady steps between them as blocks, so the file stays well under
~100 MB; counters keep each bucket's peak.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainprof.analysis import attribution, call_sites
from trainprof.analysis.compiles import CompileLog
from trainprof.analysis.loaders import training_loader_key
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.stalls import Stall
from trainprof.store.events import ProcessLog
from trainprof.store.rundir import write_user_file
from trainprof.store.session import Session
from trainprof.store.stacks import Frame, StackSpan
from trainprof.version import __version__

MIB = 1024 * 1024
DETAILED_STEPS = 50_000  # beyond, steady steps between anomalies are drawn as blocks
STEP_BLOCKS = 20_000  # about this many blocks then
STACK_EVENTS = 120_000  # frames (a B/E pair, ~340 bytes); beyond, only those inside anomalies
OTHER_RANK_STACK_EVENTS = 30_000  # each other rank's (sampled at 20 Hz): its first frames
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

CAUSE = {
    "cpu": "CPU work",
    "blocked": "blocked waiting",
    "wait": "waiting for a CPU",
    "compile": "torch.compile compiling",
    "sync": "waiting for the GPU (device→host sync)",
    "data": "waiting for data",
    "eval": "evaluation",
    "checkpoint": "a checkpoint save",
}


@dataclass
class _Span:
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

    def spans(self, pid: int, tid: int, spans: Iterable[_Span]) -> None:
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


def build(session: Session, m: Metrics) -> dict[str, Any]:
    """The trace of a loaded run, as the JSON object to write."""
    primary = session.primary
    trace = Trace(_origin(session), base_node=base_node(session))
    names = _process_names(session, trace)
    for pid, (name, order) in names.items():
        trace.meta(pid, "process_name", {"name": name})
        trace.meta(pid, "process_sort_index", {"sort_index": order})
    for p in session.processes:
        if p.n_steps:
            _steps(trace, p, m if p is primary else None)
    if primary is not None:
        _phases(trace, session, primary, m)
        _stacks(trace, trace.pid_of(primary), list(m.activity.spans), m)
        _device(trace, primary)
    _other_ranks_stacks(trace, session, primary)
    used = {(e["pid"], e["tid"]) for e in trace.events if e["ph"] in ("X", "B", "i")}
    for pid, tid in sorted(used):
        if tid in TRACK_NAMES:  # overflow lanes were named when they were opened
            trace.meta(pid, "thread_name", {"name": TRACK_NAMES[tid]}, tid)
            trace.meta(pid, "thread_sort_index", {"sort_index": 10 * tid}, tid)
    _counters(trace, session)
    events = sorted(trace.events, key=lambda e: (e["ph"] != "M", e["ts"], -e.get("dur", 0)))
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "producer": f"trainprof {__version__}",
            "run_dir": str(session.meta.get("run_dir") or session.run_dir),
            "clock": "µs since the job's launch (time.monotonic(); probe, sampler and py-spy "
            "share it)",
            "notes": trace.notes,
            "origin_monotonic_s": trace.origin,
        },
    }


def dumps(data: dict[str, Any]) -> str:
    """The trace as compact JSON text (no spaces: a long run's file is mostly events)."""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False) + "\n"


def write(path: Path, data: dict[str, Any]) -> None:
    """The trace file (created 0600, like every file trainprof writes)."""
    write_user_file(path, dumps(data))


def _origin(session: Session) -> float:
    """The earliest time any source has: the launch, normally."""
    candidates = [session.meta.get("t_launch")]
    candidates += [p.t0 for p in session.processes]
    if len(session.samples.t):
        candidates.append(min(session.samples.t))
    if session.spans:
        candidates.append(session.spans[0].t0)
    vals = [float(c) for c in candidates if isinstance(c, (int, float)) and math.isfinite(c)]
    return min(vals) if vals else 0.0


def base_node(session: Session) -> int | None:
    """The node of a merged run whose clock and host samples the session keeps."""
    for n in session.meta.get("nodes") or []:
        if isinstance(n, dict) and n.get("aligned_by") == "base":
            return int(n["node"])
    return None


def _process_names(session: Session, trace: Trace) -> dict[int, tuple[str, int]]:
    """pid → (track name, sort order): main first, then ranks, workers, other processes.
    Viewers show the pid beside the name themselves; a merged run's tracks name their node."""
    out: dict[int, tuple[str, int]] = {}
    for p in session.processes:
        h = p.header
        node = h.get("node")
        on = f" (node {node})" if isinstance(node, int) else ""
        pid = trace.pid_of(p)
        if p.role == "worker":
            wid = h.get("worker_id")
            label = f"DataLoader worker {wid}" if wid is not None else "DataLoader worker"
            out[pid] = (label + on, 100 + (wid or 0))
        elif p.role == "rank":
            out[pid] = (f"rank {h.get('rank')}{on}", 1 + int(h.get("rank") or 0))
        else:
            out[pid] = ("main process" + on, 0)
    for pid, series in session.samples.procs.items():
        if pid not in out:
            out[pid] = (series.name or "process", 1000)
    out[MACHINE_PID] = ("machine", 2000)
    return out


# ---- steps ---------------------------------------------------------------------------------


def _steps(trace: Trace, log: ProcessLog, m: Metrics | None) -> None:
    """Each step with its data wait inside; a long run draws steady steps as blocks."""
    cols = log.steps
    ts, durs, waits, samplers = cols["t"], cols["dur"], cols["wait"], cols["sampler"]
    n = len(ts)
    keep = _anomalous_steps(log, m) if n > DETAILED_STEPS else set(range(n))
    split = _DataSplit(log, m)
    spans: list[_Span] = []
    i = 0
    block = max(1, math.ceil((n - len(keep)) / STEP_BLOCKS)) if n > DETAILED_STEPS else 1
    while i < n:
        if i in keep:
            end = log.t0 + ts[i] / 1e6
            start = end - durs[i] / 1e6
            spans.append(_Span(f"step {i}", start, end, "step", {"step": i, "ms": durs[i] / 1e3}))
            spans.extend(split.parts(i, start, end, waits[i] / 1e6, samplers[i] / 1e6))
            i += 1
            continue
        j = i
        while j < n and j not in keep and j - i < block:
            j += 1
        start = log.t0 + (ts[i] - durs[i]) / 1e6
        end = log.t0 + ts[j - 1] / 1e6
        d = [durs[k] for k in range(i, j)]
        spans.append(
            _Span(
                f"steps {i}–{j - 1} (steady, drawn as one block)",
                start,
                end,
                "steps",
                {
                    "steps": j - i,
                    "mean_ms": round(sum(d) / len(d) / 1e3, 3),
                    "max_ms": max(d) / 1e3,
                    "mean_data_wait_ms": round(
                        sum(waits[k] for k in range(i, j)) / len(d) / 1e3, 3
                    ),
                },
            )
        )
        i = j
    if n > DETAILED_STEPS:
        trace.notes.append(
            f"pid {log.pid}: {n} steps; {len(keep)} anomalous ones (warm-up, stalls, epoch "
            "starts, saves, evaluations) drawn one by one, the steady steps between them in "
            f"blocks of up to {block}"
        )
    trace.spans(trace.pid_of(log), TID_STEPS, spans)


def _anomalous_steps(log: ProcessLog, m: Metrics | None) -> set[int]:
    import bisect

    ts = log.steps["t"]
    keep = set(range(min(len(ts), (m.warmup_steps if m else 0) + 1)))
    if m is not None:
        keep.update(st.index for st in m.activity.stalls)
        segs = [seg for seg, _b, _p in m.activity.saves] + list(m.activity.evals)
        for seg in segs:
            i = bisect.bisect_right(ts, int((seg.t0 - log.t0) * 1e6))
            keep.update(range(i, min(i + 2, len(ts))))
    for _k, t_iter, _w in log.epochs:
        i = bisect.bisect_right(ts, t_iter)
        keep.update(range(i, min(i + 2, len(ts))))
    keep.add(len(ts) - 1)
    return keep


class _DataSplit:
    """A step's data wait split as the ledger splits it, as far as one step's record allows."""

    def __init__(self, log: ProcessLog, m: Metrics | None) -> None:
        import bisect

        # The ledger's loader for the main process; a rank's own training loader otherwise.
        loader = m.loaders[0] if m is not None and m.loaders else None
        config = loader.config if loader else log.loaders.get(training_loader_key(log)) or {}
        self.workers = bool(config.get("num_workers"))
        self.main_parts: list[tuple[str, float]] = []
        if loader is not None and loader.main_fetch_ms is not None:
            collate = loader.main_collate_ms or 0.0
            self.main_parts = [
                ("__getitem__ (mean per batch)", max(0.0, loader.main_fetch_ms - collate) / 1e3),
                ("collate_fn (mean per batch)", collate / 1e3),
                ("pin_memory (mean per batch)", (loader.main_pin_ms or 0.0) / 1e3),
            ]
        self.fetches = log.steps["fetches"]
        # The share of the workers' wait spent receiving their batches (the ledger's, from the
        # main thread's stacks): drawn first in each step's wait, as a mean.
        led = m.ledger if m is not None and loader is not None else None
        both = led.get("transfer", "data_wait") if led else 0.0
        self.receive_frac = led.get("transfer") / both if led and both > 0 else 0.0
        self.epoch_first: set[int] = set()
        if self.workers:
            n_workers = int(config.get("num_workers") or 1)
            key = training_loader_key(log)
            for k, t_iter, _w in log.epochs:
                if k == key:
                    i = bisect.bisect_right(log.steps["t"], t_iter)
                    self.epoch_first.update(range(i, i + n_workers))

    def parts(self, i: int, start: float, end: float, wait: float, sampler: float) -> list[_Span]:
        wait = min(wait, end - start)
        if wait <= 0:
            return []
        out = [_Span("data wait", start, start + wait, "data", {"ms": round(wait * 1e3, 3)})]
        at, left = start, wait
        sampler = min(sampler, left)
        if sampler > 0:
            out.append(_Span("sampler", at, at + sampler, "data", {"ms": round(sampler * 1e3, 3)}))
            at, left = at + sampler, left - sampler
        if self.main_parts:
            batches = max(1, self.fetches[i])
            want = sum(s for _n, s in self.main_parts) * batches
            scale = min(1.0, left / want) if want > 0 else 0.0
            for name, per_batch in self.main_parts:
                d = per_batch * batches * scale
                if d > 0:
                    out.append(_Span(name, at, at + d, "data", {"ms": round(d * 1e3, 3)}))
                    at, left = at + d, left - d
        if self.receive_frac > 0 and i not in self.epoch_first and left > 1e-6:
            d = left * self.receive_frac
            out.append(
                _Span("receiving batches from workers (mean share)", at, at + d, "data",
                      {"ms": round(d * 1e3, 3)})
            )  # fmt: skip
            at, left = at + d, left - d
        if left > 1e-6:
            rest = (
                "worker start-up (epoch's first batches)"
                if i in self.epoch_first
                else "waiting on workers"
                if self.workers
                else "DataLoader's own code"
            )
            out.append(_Span(rest, at, at + left, "data", {"ms": round(left * 1e3, 3)}))
        return out


# ---- phases: warm-up, saves, evals, stalls --------------------------------------------------


def _phases(trace: Trace, session: Session, log: ProcessLog, m: Metrics) -> None:
    spans: list[_Span] = []
    launched = session.meta.get("t_launch")
    ts = log.steps["t"]
    a = m.activity
    if a.window is not None and isinstance(launched, (int, float)):
        spans.append(
            _Span(
                f"warm-up: launch to step {m.warmup_steps - 1} (excluded from the steady state)",
                float(launched),
                a.window[0],
                "phase",
            )
        )
        spans.append(
            _Span(
                f"steady state: steps {m.warmup_steps}–{len(ts) - 1}",
                a.window[0],
                a.window[1],
                "phase",
            )
        )
    for seg, size, path in a.saves:
        spans.append(
            _Span("checkpoint save", seg.t0, seg.t1, "save", {"bytes": size, "path": path})
        )
    for seg in a.evals:
        how = {
            "mode": "eval() … train()",
            "forward": "forward passes only",
            "loader": "another DataLoader",
        }
        spans.append(
            _Span("evaluation", seg.t0, seg.t1, "eval", {"seen as": how.get(seg.how, seg.how)})
        )
    spans += _compile_spans(a.compiles)
    for st in a.stalls:
        spans.append(_stall_span(st, list(a.spans), a.loop_funcs, a.step_lines))
    hang, wall = session.meta.get("hang"), session.meta.get("wall_s")
    if isinstance(hang, dict) and len(ts) and isinstance(launched, (int, float)) and wall:
        last = log.t0 + ts[-1] / 1e6
        silent = hang.get("silent_s")
        kind = "at work" if hang.get("at_work") else "hang"
        what = f"no progress for {silent:.0f} s ({kind})" if silent else f"no progress ({kind})"
        spans.append(_Span(what, last, float(launched) + float(wall), "hang", dict(hang)))
    trace.spans(trace.pid_of(log), TID_PHASES, spans)
    train_key = training_loader_key(log)
    for k, t_iter, first_wait in log.epochs:
        trace.instant(
            trace.pid_of(log),
            TID_PHASES,
            "epoch start" if k == train_key else f"epoch start (loader {k})",
            log.t0 + t_iter / 1e6,
            {"loader": k, "first_batch_wait_ms": first_wait / 1e3},
        )


def _compile_spans(log: CompileLog | None) -> list[_Span]:
    """Each compile the probe timed, with the line it ran under and Dynamo's reason."""
    if log is None:
        return []
    reasons = {r.compile_id: r.reason for r in log.recompiles}
    out = []
    for c in log.compiles:
        what = "backward, at its first run" if c.trigger == "LAZY_BACKWARD" else "graph"
        args: dict[str, Any] = {"compile id": c.compile_id, "trigger": c.trigger}
        if c.where is not None:
            args["under"] = attribution.where(c.where)
        if c.trigger != "LAZY_BACKWARD" and c.compile_id in reasons:
            args["recompiled because"] = reasons[c.compile_id]
        out.append(
            _Span(
                f"torch.compile: {what} {c.compile_id or ''}".rstrip(), c.t0, c.t1, "compile", args
            )
        )
    return out


def _stall_span(
    st: Stall,
    spans: Sequence[StackSpan],
    loop_funcs: frozenset[tuple[str, str]],
    step_lines: frozenset[Frame],
) -> _Span:
    """``stall: CPU work in refresh_pseudo_labels()``: its cause and what the loop called."""
    site = call_sites.call_site(spans, [(st.t0, st.t1)], loop_funcs, step_lines) if spans else None
    cause = CAUSE.get(st.cause, st.cause)
    args: dict[str, Any] = {
        "step": st.index,
        "cause": st.cause,
        "beyond_median_ms": round(st.excess_s * 1e3, 3),
    }
    if site is None:
        return _Span(f"stall: {cause} (step {st.index})", st.t0, st.t1, "stall", args)
    args["where"] = site.where
    if site.hot_where:
        args["hot line"] = site.hot_where
    return _Span(f"stall: {cause} in {site.called}", st.t0, st.t1, "stall", args)


# ---- stacks --------------------------------------------------------------------------------


def _stacks(trace: Trace, pid: int, spans: Sequence[StackSpan], m: Metrics) -> None:
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


def _other_ranks_stacks(trace: Trace, session: Session, primary: ProcessLog | None) -> None:
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


# ---- the device timeline ---------------------------------------------------------------------


def _device(trace: Trace, log: ProcessLog) -> None:
    """Timed steps on the GPU's clock: durations the GPU measured, placed from the host's mark
    of the step's first batch (the GPU runs behind the host by an unmeasured queue delay)."""
    spans: list[_Span] = []
    alloc: list[tuple[float, float]] = []
    reserved: list[tuple[float, float]] = []
    for r in log.device:
        end = log.t0 + r[0] / 1e6
        if r[10] >= 0:
            alloc.append((end, r[10] / MIB))
        if r[11] >= 0:
            reserved.append((end, r[11] / MIB))
        host = r[6:9]
        if any(h < 0 for h in host):
            continue
        # Summed phases, one bar each (a step of micro-batches interleaves them).
        at = end - (sum(host) + max(r[14], 0)) / 1e6
        parts = [("forward", r[2]), ("backward", r[3])]
        if r[13] >= 0:  # a step of one batch has no wait for a later micro-batch
            parts.append(("waiting for micro-batches", r[13]))
        parts += [("optimizer", r[4]), ("idle before next step", r[5])]
        for name, dev in parts:
            if dev < 0:
                break
            spans.append(
                _Span(f"GPU {name}", at, at + dev / 1e6, "device", {"step": r[1], "ms": dev / 1e3})
            )
            at += dev / 1e6
    if spans:
        trace.spans(trace.pid_of(log), TID_DEVICE, spans)
        trace.notes.append(
            "GPU track: durations on the GPU's clock (CUDA events), placed from the host's mark "
            "of each timed step's first batch; about one step in 16 is timed (at most 8 a second)"
        )
    trace.counter(trace.pid_of(log), "CUDA allocated (MiB)", alloc, "allocated")
    trace.counter(trace.pid_of(log), "CUDA reserved (MiB)", reserved, "reserved")


# ---- counters ------------------------------------------------------------------------------


def _counters(trace: Trace, session: Session) -> None:
    s = session.samples
    for pid, series in s.procs.items():
        trace.counter(pid, "CPU %", zip(series.t, series.cpu, strict=True), "cpu")
        trace.counter(
            pid,
            "RSS (MiB)",
            ((t, v / MIB) for t, v in zip(series.t, series.rss, strict=True)),
            "rss",
        )
        if any(not math.isnan(v) for v in series.uss):
            trace.counter(
                pid,
                "USS (MiB)",
                ((t, v / MIB) for t, v in zip(series.t, series.uss, strict=True)),
                "uss",
            )
    trace.counter(
        MACHINE_PID,
        "swap used (MiB)",
        ((t, v / MIB) for t, v in zip(s.t, s.swap_used, strict=True)),
        "used",
    )
    swap_io = (
        (t, (a + b) / MIB) for t, a, b in zip(s.t, s.swap_in_bps, s.swap_out_bps, strict=True)
    )
    trace.counter(MACHINE_PID, "swap in+out (MiB/s)", swap_io, "io")
    trace.counter(
        MACHINE_PID,
        "GPU utilization % (mean of the job's GPUs)",
        zip(s.t, s.gpu_util, strict=True),
        "util",
    )
    for index, (ts, used) in sorted(s.gpu_mem_by_index.items()):
        points = ((t, v / MIB) for t, v in zip(ts, used, strict=True))
        trace.counter(MACHINE_PID, f"GPU {index} memory used (MiB)", points, "used")
