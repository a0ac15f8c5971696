"""A run directory without probe steps (attach) → the Metrics the rules and renderers read.
Pure: reads what the Session loaded (``session.sampled``: the processes sampled and their stacks).

There are no probe steps, so everything comes from the main thread's stack samples:

- the window is what py-spy covered; the step period is estimated from the stacks' rhythm
  (``periodicity``, ``rate_estimate``), iterations/s from it and the time outside stalls;
- training progress shows as samples in backward or the optimizer; a gap between them longer
  than ``STALL_FACTOR`` step periods (and ``STALL_MIN_EXCESS_S`` more than one) is a stall,
  its cause read from its stacks as `trainprof run` reads a slow step's (checkpoint, eval,
  compile, blocked, data, CPU work; ``gap_stalls``); its time beyond one period is the stall's;
- the time ledger splits the window by the stacks: data (sampler, ``__getitem__``, collate,
  pin, waiting on workers), stalls by cause, then forward/backward/optimizer/logging/loop
  (``ledger_from_stacks``).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from trainprof.analysis import attribution, call_sites, frameworks, periodicity
from trainprof.analysis.cpu_starvation import cpu_starvation
from trainprof.analysis.gap_stalls import loop_functions, number_steps
from trainprof.analysis.ledger import with_cpu_wait
from trainprof.analysis.ledger_from_stacks import build_ledger, category_runs, shares_of
from trainprof.analysis.memory import growth
from trainprof.analysis.metrics import Activity, Metrics
from trainprof.analysis.outside_view import (
    HeldStack,
    OutsideView,
    RankAttach,
    RateEstimate,
)
from trainprof.analysis.rate_estimate import progress_runs, rate_estimate, rate_of
from trainprof.analysis.rules import hang as hang_rule
from trainprof.analysis.stalls import (
    Segment,
    period,
)
from trainprof.analysis.stats import finite, mean
from trainprof.analysis.stillness import stillness
from trainprof.analysis.usercode import is_torch_path
from trainprof.analysis.worker_load import worker_load
from trainprof.store.gpus import machine_utils
from trainprof.store.host_totals import own_cost, peak_memory, usable_cpus
from trainprof.store.sampled import Sampled
from trainprof.store.session import Session
from trainprof.store.stacks import StackSpan


def _window(spans: Sequence[StackSpan]) -> tuple[float, float] | None:
    if not spans:
        return None
    return spans[0].t0, spans[-1].t1


def _window_mean(session: Session, series: Any, window: tuple[float, float] | None) -> float | None:
    ts = session.samples.t
    vals = finite(
        v for t, v in zip(ts, series, strict=True) if window is None or window[0] <= t <= window[1]
    )
    return mean(vals) if vals else None


def _rank_views(sampled: Sampled) -> tuple[RankAttach, ...]:
    """Each rank's rate and shares, where several ranks of a torchrun job were sampled."""
    if len(sampled.processes) < 2:
        return ()
    out = []
    rate_hz = sampled.rate_hz
    for proc in sampled.processes:
        spans = proc.spans
        window = _window(spans)
        if window is None:
            continue
        source = proc.source
        rh, stalls = rate_of(spans, source, rate_hz, window)
        led = build_ledger(spans, source, window, stalls)
        out.append(
            RankAttach(
                proc.pid,
                proc.rank,
                rate_estimate(
                    rh, window, stalls, progress_runs(spans, source, stalls, 1 / rate_hz)
                ),
                shares_of(led),
                led.window_s,
            )
        )
    return tuple(out)


def compute(session: Session, sampled: Sampled) -> Metrics:
    """The Metrics of a job sampled from outside: ``sampled`` is ``session.sampled``."""
    meta = session.meta
    rate_hz = sampled.rate_hz
    spans = tuple(session.spans)
    source = session.source
    window = _window(spans)
    rhythm, stalls = (
        rate_of(spans, source, rate_hz, window)
        if window
        else (periodicity.Rhythm(None, 0.0, 0, 1.0 / rate_hz, "no stack samples"), [])
    )
    led = build_ledger(spans, source, window, stalls) if window else None
    rate = (
        rate_estimate(rhythm, window, stalls, progress_runs(spans, source, stalls, 1 / rate_hz))
        if window
        else RateEstimate(None, None, periodicity.METHOD, "none", 0.0, 0, rhythm.reason)
    )
    if window is not None:
        stalls = number_steps(stalls, window[0], rate.period_s if rate.steps_per_s else None)
    counted = [st for st in stalls if st.cause in ("cpu", "blocked", "logging")]
    p = period([st.index for st in counted]) if len(counted) >= 3 and rate.steps_per_s else None
    gaps = [b.t0 - a.t0 for a, b in zip(counted, counted[1:], strict=False)]
    saves = category_runs(spans, source, "save")
    evals = [Segment(st.t0, st.t1, "forward") for st in stalls if st.cause == "eval"]
    busy = [(st.t0, st.t1) for st in stalls]
    inside = {id(sp) for sp, _s in attribution.overlaps(spans, busy)}
    loop_spans = [sp for sp in spans if id(sp) not in inside]
    loop_funcs = loop_functions(loop_spans, source)
    growths = []
    if window is not None:
        for pid, series in session.samples.procs.items():
            role = "main" if pid == sampled.pid else "worker"
            g = growth(series, role, *window)
            if g is not None:
                growths.append(g)
    swap_io = finite(
        a + b
        for a, b in zip(session.samples.swap_in_bps, session.samples.swap_out_bps, strict=True)
    )
    worker_pids = [w.pid for w in sampled.workers]
    activity = Activity(
        window=window,
        run_span_s=None,
        stalls=tuple(stalls),
        saves=tuple((seg, -1, "") for seg in saves),
        evals=tuple(evals),
        profile=attribution.profile(spans, source, *window) if window else None,
        loop_profile=attribution.profile(loop_spans, source, *window) if window else None,
        spans=spans,
        source=source,
        stacks_error=(meta.get("stacks") or {}).get("error"),
        growths=tuple(growths),
        mem_total=session.samples.mem_total,
        mem_available_min=min(finite(session.samples.mem_available), default=None),
        swap_total=session.samples.swap_total,
        swap_used_max=max(finite(session.samples.swap_used), default=None),
        swap_io_bps_mean=mean(swap_io) if swap_io else None,
        loop_funcs=loop_funcs,
        step_lines=call_sites.step_lines(loop_spans, source, loop_funcs),
        framework=frameworks.detect(spans),
    )
    workers_by_pid = sampled.worker_spans()
    still = stillness(session, sampled, spans)
    ranks = _rank_views(sampled)
    if still is not None and still.processes:
        held = {p.pid: p for p in still.processes}
        rate = _held_rate(rate, still.processes[0], still.window_s)
        ranks = tuple(
            replace(r, rate=_held_rate(r.rate, held.get(r.pid), still.window_s)) for r in ranks
        )
    view = OutsideView(
        pid=sampled.pid or 0,
        given_pid=sampled.given_pid or 0,
        note=sampled.note,
        rate_hz=rate_hz,
        sampled_s=led.window_s if led else 0.0,
        rate=rate,
        shares=shares_of(led) if led else {},
        stall_period_steps=p,
        stall_period_s=statistics.median(gaps) if len(gaps) >= 2 else None,
        workers=len(worker_pids),
        workers_at_once=most_at_once(session, worker_pids),
        target_exit=sampled.target_exit,
        ranks=ranks,
        worker_spans=tuple(sp for spans in workers_by_pid.values() for sp in spans),
        stillness=still,
        py_spy_restarts=sampled.main.py_spy_restarts if sampled.main else 0,
    )
    usable = usable_cpus(session.samples, sampled.pid, meta.get("usable_cpus"))
    starvation = cpu_starvation(session.samples, sampled.pid, window, usable, meta.get("cpu_count"))
    if led is not None and starvation is not None:
        led = with_cpu_wait(led, starvation.runq)
    return Metrics(
        unit="step",
        total_steps=0,
        warmup_steps=0,
        warmup_s=None,
        time_to_first_step_s=None,
        steady=None,
        usable_cpus=usable,
        cpu_percent_mean=_window_mean(session, session.samples.tree_cpu, window),
        trainprof_cpu_percent_mean=_window_mean(session, session.samples.self_cpu, window),
        worker_load=worker_load(session.samples, worker_pids, window),
        cpu_starvation=starvation,
        peak_memory=peak_memory(session.samples),
        own_cost=own_cost(session.samples, usable),
        gpu_util_mean=_window_mean(session, session.samples.gpu_util, window),
        gpu_unavailable=session.samples.gpu_unavailable,
        gpus=session.samples.job_gpus,
        machine_gpus=machine_utils(session.samples, window),
        torch_seen=any(is_torch_path(f[1]) for s in spans[:2000] for f in s.frames),
        exit_code=None,
        stopped_by=meta.get("stopped_by"),
        activity=activity,
        ledger=led,
        outside=view,
        stack_rate_hz=rate_hz,
    )


def _held_rate(rate: RateEstimate, held: HeldStack | None, window_s: float) -> RateEstimate:
    """A process (the main one, or a rank's) that held one stack has no rhythm to look for:
    its iterations row says that, not "no autocorrelation peak"."""
    if rate.steps_per_s is not None or held is None or held.share < hang_rule.ATTACH_HELD.value:
        return rate
    reason = (
        f"the main thread held one stack for {held.share:.0%} of the {window_s:.1f} s "
        "sampled: no step to time"
    )
    return replace(rate, reason=reason, period_s=None)


def most_at_once(session: Session, worker_pids: Sequence[int]) -> int | None:
    """The most DataLoader workers alive at one tick of the host sampler (None: it saw none)."""
    pids = set(worker_pids)
    alive = Counter(t for pid, s in session.samples.procs.items() if pid in pids for t in s.t)
    return max(alive.values()) if alive else None
