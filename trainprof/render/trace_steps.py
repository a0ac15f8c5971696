"""The ``steps`` track: each optimizer step with its data wait split inside it.

A long run keeps every anomalous step and draws the steady steps between them as blocks.
"""

from __future__ import annotations

import bisect
import math

from trainprof.analysis.loaders import training_loader_key, training_loader_keys
from trainprof.analysis.metrics import Metrics
from trainprof.render.trace_events import TID_STEPS, Span, Trace
from trainprof.store.events import ProcessLog

DETAILED_STEPS = 50_000  # beyond, steady steps between anomalies are drawn as blocks
STEP_BLOCKS = 20_000  # about this many blocks then


def steps(trace: Trace, log: ProcessLog, m: Metrics | None) -> None:
    """Each step with its data wait inside; a long run draws steady steps as blocks."""
    cols = log.steps
    ts, durs, waits, samplers = cols["t"], cols["dur"], cols["wait"], cols["sampler"]
    n = len(ts)
    keep = _anomalous_steps(log, m) if n > DETAILED_STEPS else set(range(n))
    split = _DataSplit(log, m)
    spans: list[Span] = []
    i = 0
    block = max(1, math.ceil((n - len(keep)) / STEP_BLOCKS)) if n > DETAILED_STEPS else 1
    while i < n:
        if i in keep:
            end = log.t0 + ts[i] / 1e6
            start = end - durs[i] / 1e6
            spans.append(Span(f"step {i}", start, end, "step", {"step": i, "ms": durs[i] / 1e3}))
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
            Span(
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
            keys = training_loader_keys(log)
            for k, t_iter, _w in log.epochs:
                if k in keys:
                    i = bisect.bisect_right(log.steps["t"], t_iter)
                    self.epoch_first.update(range(i, i + n_workers))

    def parts(self, i: int, start: float, end: float, wait: float, sampler: float) -> list[Span]:
        wait = min(wait, end - start)
        if wait <= 0:
            return []
        out = [Span("data wait", start, start + wait, "data", {"ms": round(wait * 1e3, 3)})]
        at, left = start, wait
        sampler = min(sampler, left)
        if sampler > 0:
            out.append(Span("sampler", at, at + sampler, "data", {"ms": round(sampler * 1e3, 3)}))
            at, left = at + sampler, left - sampler
        if self.main_parts:
            batches = max(1, self.fetches[i])
            want = sum(s for _n, s in self.main_parts) * batches
            scale = min(1.0, left / want) if want > 0 else 0.0
            for name, per_batch in self.main_parts:
                d = per_batch * batches * scale
                if d > 0:
                    out.append(Span(name, at, at + d, "data", {"ms": round(d * 1e3, 3)}))
                    at, left = at + d, left - d
        if self.receive_frac > 0 and i not in self.epoch_first and left > 1e-6:
            d = left * self.receive_frac
            out.append(
                Span("receiving batches from workers (mean share)", at, at + d, "data",
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
            out.append(Span(rest, at, at + left, "data", {"ms": round(left * 1e3, 3)}))
        return out
