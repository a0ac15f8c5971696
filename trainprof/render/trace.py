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
from pathlib import Path
from typing import Any

from trainprof.analysis.metrics import Metrics
from trainprof.render.trace_counters import counters, device
from trainprof.render.trace_events import MACHINE_PID, TRACK_NAMES, Trace
from trainprof.render.trace_phases import phases
from trainprof.render.trace_stacks import other_ranks_stacks, stacks
from trainprof.render.trace_steps import steps
from trainprof.store.rundir import write_user_file
from trainprof.store.session import Session
from trainprof.version import __version__


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
            steps(trace, p, m if p is primary else None)
    if primary is not None:
        phases(trace, session, primary, m)
        stacks(trace, trace.pid_of(primary), list(m.activity.spans), m)
        device(trace, primary)
    other_ranks_stacks(trace, session, primary)
    used = {(e["pid"], e["tid"]) for e in trace.events if e["ph"] in ("X", "B", "i")}
    for pid, tid in sorted(used):
        if tid in TRACK_NAMES:  # overflow lanes were named when they were opened
            trace.meta(pid, "thread_name", {"name": TRACK_NAMES[tid]}, tid)
            trace.meta(pid, "thread_sort_index", {"sort_index": 10 * tid}, tid)
    counters(trace, session)
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


def time_zero(data: dict[str, Any]) -> float:
    """A built trace's time zero (the launch), on the monotonic clock."""
    return float(data.get("otherData", {}).get("origin_monotonic_s", 0.0))


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
