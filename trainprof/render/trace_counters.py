"""The GPU track on the device's clock, and counters: CPU, memory, swap and GPU use over time."""

from __future__ import annotations

import math

from trainprof.render.trace_events import MACHINE_PID, TID_DEVICE, Span, Trace
from trainprof.store.events import ProcessLog
from trainprof.store.session import Session

MIB = 1024 * 1024


def device(trace: Trace, log: ProcessLog) -> None:
    """Timed steps on the GPU's clock: durations the GPU measured, placed from the host's mark
    of the step's first batch (the GPU runs behind the host by an unmeasured queue delay)."""
    spans: list[Span] = []
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
                Span(f"GPU {name}", at, at + dev / 1e6, "device", {"step": r[1], "ms": dev / 1e3})
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


def counters(trace: Trace, session: Session) -> None:
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
