"""Session → Metrics from the probe's timed steps: the steady window, its ledger, stalls,
evaluations, saves, loaders, host and GPU readings. Pure: no I/O."""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Sequence
from typing import Any, overload

from trainprof.analysis import attribution, call_sites, compiles, debug_modes, frameworks, ledger
from trainprof.analysis import mfu as mfu_mod
from trainprof.analysis.compiles import CompileLog
from trainprof.analysis.cpu_starvation import cpu_starvation
from trainprof.analysis.cpu_verdict import cpu_bottleneck
from trainprof.analysis.device import (
    Bottleneck,
    DeviceView,
    bottleneck,
    device_view,
)
from trainprof.analysis.ledger import DATA, Ledger
from trainprof.analysis.loaders import (
    epoch_first_steps,
    loader_views,
    num_workers,
    training_loader_keys,
)
from trainprof.analysis.memory import growth
from trainprof.analysis.metrics import (
    HOST_WORK,
    MIN_SPLIT_SAMPLES,
    MIN_STEADY,
    SPARK_BINS,
    Activity,
    LoaderView,
    Metrics,
    trains_on_cuda,
    warmup_steps,
)
from trainprof.analysis.ranks import DEVICE_BACKENDS, RankView, backend_of, rank_views
from trainprof.analysis.stalls import (
    Segment,
    eval_segments,
    find_stalls,
    outside_stops,
    refine,
    save_segments,
    saving_calls,
    waits_for_a_cpu,
)
from trainprof.analysis.stats import bins, finite, mean
from trainprof.analysis.step_columns import (
    steady_stats,
    step_columns,
    without_eval_samples,
)
from trainprof.analysis.worker_load import busy_workers, worker_load
from trainprof.store.events import ProcessLog
from trainprof.store.gpus import machine_utils
from trainprof.store.host_totals import own_cost, peak_memory, usable_cpus
from trainprof.store.session import Session
from trainprof.store.stacks import StackSpan


def _workers_asked_info(session: Session) -> bool | None:
    workers = session.workers
    if not workers:
        return None
    return any(i.get("asked_worker_info") is True for p in workers for i in p.infos)


def _workers_first_batches(session: Session) -> tuple[tuple[int, int], ...]:
    out = []
    for p in session.workers:
        worker_id = p.header.get("worker_id")
        crc = next((i["first_batch"] for i in p.infos if "first_batch" in i), None)
        if isinstance(worker_id, int) and isinstance(crc, int):
            out.append((worker_id, crc))
    return tuple(out)


def _probe_missing(meta: dict[str, Any]) -> str | None:
    probe = meta.get("probe")
    if isinstance(probe, dict) and probe.get("loaded") is False:
        return str(probe.get("reason") or "no process of the job loaded it")
    return None


def compute(session: Session) -> Metrics:
    meta = session.meta
    primary = session.primary
    unit, cols = step_columns(primary)
    n = len(cols["t"]) if cols else 0
    flops = mfu_mod.flop_count(primary.infos) if primary else None
    # The step whose FLOPs were counted ran slow (each op through Python): warm-up, not data.
    warm = min(n, max(warmup_steps(n), mfu_mod.counted_steps(flops) if unit == "step" else 0))
    steady, durations = steady_stats(cols, warm) if n - warm >= MIN_STEADY else (None, ())
    if steady is not None and not (primary and primary.loaders):
        steady = dataclasses.replace(steady, data_wait_frac=None)
    t0 = primary.t0 if primary else 0.0
    launched = meta.get("t_launch")
    first_t = t0 + cols["t"][0] / 1e6 if n else None
    warm_end = t0 + cols["t"][warm - 1] / 1e6 if n and warm else None
    window = (warm_end, t0 + cols["t"][-1] / 1e6) if steady and warm_end else None
    loaders = loader_views(session, primary)
    activity = _activity(session, primary, warm, window, cols)
    usable = usable_cpus(session.samples, primary.pid if primary else None, meta.get("usable_cpus"))
    starvation = cpu_starvation(
        session.samples,
        primary.pid if primary else None,
        window,
        usable,
        meta.get("cpu_count"),
    )
    if starvation is not None and activity.stalls:
        waits = waits_for_a_cpu(list(activity.stalls), activity.spans, window, starvation.runq)
        activity = dataclasses.replace(activity, stalls=tuple(waits))
    if steady is not None and activity.evals and primary is not None:
        steady = without_eval_samples(steady, cols, warm, activity.evals, primary.t0)
    rate = session.stack_rate_hz
    min_profile_s = MIN_SPLIT_SAMPLES / rate if rate else 0.0
    led = (
        _ledger(primary, cols, warm, activity, loaders, min_profile_s)
        if window and primary
        else None
    )
    if led is not None and starvation is not None:
        led = ledger.with_cpu_wait(led, starvation.runq)
    device = device_view(primary.device, primary.t0, window) if primary and window else None
    gpu_util = _window_mean(session, session.samples.gpu_util, window)
    cuda = trains_on_cuda(activity.precision)
    comm = _collectives_on_device(primary)
    return Metrics(
        unit=unit,
        total_steps=n,
        warmup_steps=warm,
        warmup_s=(warm_end - launched) if (warm_end and launched) else None,
        time_to_first_step_s=(first_t - launched) if (first_t and launched) else None,
        steady=steady,
        durations_s=durations,
        sparkline=tuple(bins(durations, SPARK_BINS)),
        loaders=loaders,
        usable_cpus=usable,
        cpu_percent_mean=_window_mean(session, session.samples.tree_cpu, window),
        trainprof_cpu_percent_mean=_window_mean(session, session.samples.self_cpu, window),
        worker_load=worker_load(
            session.samples, busy_workers(session.workers, session.samples), window
        ),
        cpu_starvation=starvation,
        peak_memory=peak_memory(session.samples),
        own_cost=own_cost(session.samples, usable),
        gpu_util_mean=gpu_util,
        gpu_unavailable=session.samples.gpu_unavailable,
        gpus=session.samples.job_gpus,
        machine_gpus=machine_utils(session.samples, window),
        torch_seen=any(p.torch_imported_us is not None for p in session.processes),
        probe_missing=_probe_missing(meta),
        events_unread=bool(session.unread),
        workers_asked_info=_workers_asked_info(session),
        workers_first_batches=_workers_first_batches(session),
        exit_code=meta.get("exit_code"),
        stopped_by=meta.get("stopped_by"),
        activity=activity,
        ledger=led,
        device=device,
        collectives_on_device=comm,
        bottleneck=(
            _bottleneck(led, device, gpu_util, comm) if cuda else cpu_bottleneck(led, starvation)
        )
        if led
        else None,
        mfu=mfu_mod.mfu(
            flops, steady.steps_per_s if steady else None, activity.precision, activity.autocast
        ),
        stack_rate_hz=rate,
    )


def _bottleneck(
    led: Ledger, device: DeviceView | None, util: float | None, comm: str | None
) -> Bottleneck | None:
    idle = device.idle_share if device is not None else None
    top = max(HOST_WORK, key=led.share)
    host_top = (top, led.share(top)) if led.share(top) > 0 else None
    return bottleneck(idle, util, led.share(*DATA), led.share(*HOST_WORK), host_top, comm)


def _collectives_on_device(primary: ProcessLog | None) -> str | None:
    """The backend of a job of several ranks whose collectives run on the GPU's streams (NCCL),
    as the primary rank's probe saw it; None for one process or a host backend (gloo)."""
    if primary is None:
        return None
    world = primary.header.get("world_size")
    if not isinstance(world, int) or world < 2:
        return None
    backend = backend_of(primary)
    return backend if backend in DEVICE_BACKENDS else None


def _ledger(
    log: ProcessLog,
    cols: dict[str, Any],
    warm: int,
    a: Activity,
    loaders: tuple[LoaderView, ...],
    min_profile_s: float,
) -> Ledger:
    main = loaders[0] if loaders else None
    fetch = None
    if main is not None and main.main_fetch_ms is not None:
        collate = main.main_collate_ms or 0.0
        fetch = ledger.MainFetch(
            getitem_s=max(0.0, main.main_fetch_ms - collate) / 1e3,
            collate_s=collate / 1e3,
            pin_s=(main.main_pin_ms or 0.0) / 1e3,
        )
    return ledger.build(
        ledger.StepCols(
            log.t0, cols["t"], cols["dur"], cols["wait"], cols["sampler"], cols["fetches"], warm
        ),
        saves=[(g.t0, g.t1) for g, _b, _p in a.saves],
        evals=[(g.t0, g.t1) for g in a.evals],
        compiles=a.compiles.segments if a.compiles else (),
        stalls=[ledger.StallSpan(st.index, st.excess_s, st.cause) for st in a.stalls],
        epoch_first_steps=epoch_first_steps(log) if main and main.config.get("num_workers") else (),
        main_fetch=fetch,
        step_profile=a.loop_profile.seconds if a.loop_profile is not None else None,
        min_profile_s=min_profile_s,
        transfer_frac=ledger.transfer_frac(a.loop_profile.data_parts, min_profile_s)
        if a.loop_profile is not None
        else 0.0,
    )


def _primary_spans(
    session: Session, primary: ProcessLog | None
) -> tuple[tuple[StackSpan, ...], str | None]:
    """The stacks of the process whose steps the report reads, and why there are none. py-spy
    samples the process that trained (run follows it from a launcher to rank 0); where that
    was another process (a launcher whose trainer was not found in time), its stacks would
    charge the trainer's steps with the launcher's waiting: they are not used."""
    stacks = session.meta.get("stacks") or {}
    error = stacks.get("error")
    sampled = stacks.get("pid")
    same_node = primary is not None and primary.header.get("node") in (None, 0)
    if primary is None or not isinstance(sampled, int) or sampled == primary.pid or not same_node:
        return tuple(session.spans), error
    rank = primary.header.get("rank")
    if isinstance(rank, int) and rank in session.rank_spans:
        return tuple(session.rank_spans[rank]), error  # its own, from the per-rank recorder
    return (), f"py-spy sampled pid {sampled}, not the process that trained (pid {primary.pid})"


def _activity(
    session: Session,
    primary: ProcessLog | None,
    warm: int,
    window: tuple[float, float] | None,
    cols: dict[str, Any],
) -> Activity:
    samples = session.samples
    infos = primary.infos if primary else []
    precision = next((i["precision"] for i in infos if isinstance(i.get("precision"), dict)), None)
    cuda = trains_on_cuda(precision)
    spans, stacks_error = _primary_spans(session, primary)
    evals = eval_segments(primary) if primary else []
    saves = save_segments(primary) if primary else []
    stalls = find_stalls(primary, cols, warm, evals, saves) if primary and cols else []
    stalls = outside_stops(stalls, _stops(session.meta))
    compile_log = compiles.read(primary) if primary else None
    if primary is not None and stalls:
        train_keys = training_loader_keys(primary)
        others = sorted(primary.t0 + t / 1e6 for k, t, _w in primary.epochs if k not in train_keys)
        stalls, stall_evals = refine(stalls, spans, session.source, others, cuda)
        evals = sorted(evals + stall_evals, key=lambda g: g.t0)
        if compile_log is not None:
            stalls = compiles.label_stalls(stalls, compile_log)
    prof = attribution.profile(spans, session.source, *window, cuda) if spans and window else None
    busy = [(st.t0, st.t1) for st in stalls] + [(g.t0, g.t1) for g in evals + saves]
    busy += compile_log.segments if compile_log else []
    loop_spans = _outside(spans, busy) if spans and window else []
    loop_prof = (
        attribution.profile(loop_spans, session.source, *window, cuda) if spans and window else None
    )
    loop_funcs = attribution.loop_functions(loop_spans, session.source) | attribution.step_callers(
        infos
    )
    stalls = saving_calls(stalls, saves, spans, loop_funcs)
    roles = {p.pid: p.role for p in session.processes}
    growths = []
    if window is not None:  # start-up (imports, allocator warm-up) always grows memory
        progress = StepEnds(primary.t0, cols["t"]) if primary and cols else StepEnds(0.0, [])
        for pid, series in samples.procs.items():
            g = growth(series, roles.get(pid, "other"), *window, progress)
            if g is not None:
                growths.append(g)
    swap_io = [a + b for a, b in zip(samples.swap_in_bps, samples.swap_out_bps, strict=True)]
    out = session.meta.get("output") or {}
    launched = session.meta.get("t_launch")
    training = _train_wait(primary, warm, evals) if primary and window else (None, None)
    return Activity(
        precision=precision,
        autocast=tuple(f"{i['autocast']}:{i.get('dtype')}" for i in infos if "autocast" in i),
        ranks=_ranks(session),
        window=window,
        run_span_s=(window[1] - launched) if window and launched else None,
        stalls=tuple(stalls),
        saves=tuple(
            (seg, b, path) for seg, (_t, _d, b, path) in zip(saves, primary.saves, strict=True)
        )
        if primary
        else (),
        evals=tuple(evals),
        profile=prof,
        loop_profile=loop_prof,
        train_wait_frac=training[0],
        train_step_s=training[1],
        spans=spans,
        source=session.source,
        stacks_error=stacks_error,
        growths=tuple(growths),
        mem_total=samples.mem_total,
        mem_available_min=min(finite(samples.mem_available), default=None),
        swap_total=samples.swap_total,
        swap_used_max=max(finite(samples.swap_used), default=None),
        swap_io_bps_mean=mean(finite(swap_io)) if finite(swap_io) else None,
        output_lines=(out.get("stdout_lines", 0) + out.get("stderr_lines", 0)) if out else None,
        output_bytes=(out.get("stdout_bytes", 0) + out.get("stderr_bytes", 0)) if out else None,
        loop_funcs=loop_funcs,
        step_lines=call_sites.step_lines(loop_spans, session.source, loop_funcs),
        loader_caller=attribution.recorded_caller(infos, "loader_callers"),
        compile_s=_warmup_compile_s(compile_log, spans, window),
        compiles=compile_log,
        debug=debug_modes.read(primary) if primary else None,
        optimizers=next((i["optimizers"] for i in reversed(infos) if "optimizers" in i), None),
        structure=next(
            (i["structure"] for i in infos if isinstance(i.get("structure"), dict)), None
        ),
        unoptimized=next(
            (i["unoptimized"] for i in infos if isinstance(i.get("unoptimized"), dict)), None
        ),
        zero_grad_kept=any(i.get("zero_grad_set_to_none") is False for i in infos),
        framework=frameworks.detect(spans, infos),
        flops=mfu_mod.flop_count(infos),
        timeline_error=next(
            (str(i["device_timeline_error"]) for i in infos if "device_timeline_error" in i), None
        ),
        main_cpu_in_stalls=_cpu_in(session, primary, [(st.t0, st.t1) for st in stalls]),
        probe_errors=tuple(
            dict.fromkeys(
                [*session.unread]
                + [
                    str(i["probe_error"])
                    for p in session.processes
                    for i in p.infos
                    if "probe_error" in i
                ]
            )
        ),
    )


def _warmup_compile_s(
    log: CompileLog | None, spans: tuple[StackSpan, ...], window: tuple[float, float] | None
) -> float | None:
    """Seconds torch.compile compiled before the steady window (warm-up): as the probe timed
    them, else as the main thread's stacks show them (a torch without compile callbacks)."""
    if log is not None and log.compiles:
        end = window[0] if window else max(c.t1 for c in log.compiles)
        return log.seconds_before(end) or None
    if not spans:
        return None
    end = window[0] if window else spans[-1].t1
    stop = bisect.bisect_left([s.t0 for s in spans], end)
    verdicts: dict[int, bool] = {}  # stacks are interned: judge each distinct stack once
    total = 0.0
    for s in spans[:stop]:
        key = id(s.frames)
        if key not in verdicts:
            verdicts[key] = attribution.is_compiling(s.frames)
        if verdicts[key]:
            total += min(s.t1, end) - s.t0
    return total or None


def _cpu_in(
    session: Session, primary: ProcessLog | None, windows: list[tuple[float, float]]
) -> float | None:
    """The main process's CPU % in the host samples taken inside the windows (None if fewer
    than two samples fall inside: stalls are often shorter than the sampling interval)."""
    if primary is None or not windows:
        return None
    series = session.samples.procs.get(primary.pid)
    if series is None:
        return None
    windows = sorted(windows)
    starts = [a for a, _b in windows]
    inside = []
    for t, c in zip(series.t, series.cpu, strict=True):
        i = bisect.bisect_right(starts, t) - 1
        if i >= 0 and t <= windows[i][1] and not math.isnan(c):
            inside.append(c)
    return mean(inside) if len(inside) >= 2 else None


def _window_mean(session: Session, series: Any, window: tuple[float, float] | None) -> float | None:
    ts = session.samples.t
    if window is not None:
        vals = finite(v for t, v in zip(ts, series, strict=True) if window[0] <= t <= window[1])
        if vals:
            return mean(vals)
    vals = finite(series)
    return mean(vals) if vals else None


def _train_wait(
    log: ProcessLog, warm: int, evals: list[Segment]
) -> tuple[float | None, float | None]:
    """Data-wait share of steady steps that contain no evaluation and no epoch start (an eval
    loader's wait is the eval's cost, not the training input pipeline's), and their mean
    duration in seconds."""
    ts, durs, waits = log.steps["t"], log.steps["dur"], log.steps["wait"]
    # Each worker's first batch of an epoch carries that worker's start-up: worker-startup's
    # cost, not the steady input pipeline's. Skip the first num_workers steps of every epoch.
    workers = num_workers(log)
    skip: set[int] = set()
    for _k, t_iter, _w in log.epochs:
        i = bisect.bisect_right(ts, t_iter)
        skip.update(range(i, i + workers))
    # Steps overlapping an evaluation: for each eval, the steps whose span reaches into it
    # (a step ends at ts[i] and starts at ts[i] - durs[i]; steps are in time order).
    for e in evals:
        lo, hi = int((e.t0 - log.t0) * 1e6), int((e.t1 - log.t0) * 1e6)
        i = bisect.bisect_right(ts, lo)
        while i < len(ts) and ts[i] - durs[i] < hi:
            skip.add(i)
            i += 1
    wait = total = count = 0
    for i in range(warm, len(ts)):
        if i in skip:
            continue
        wait += waits[i]
        total += durs[i]
        count += 1
    if total <= 0:
        return None, None
    return min(1.0, wait / total), total / count / 1e6


def _ranks(session: Session) -> tuple[RankView, ...]:
    return rank_views(session, warmup_steps, 2 * MIN_STEADY)


def _outside(spans: tuple[StackSpan, ...], windows: list[tuple[float, float]]) -> list[StackSpan]:
    """Spans that touch none of the windows (the loop without its stalls, saves and evals)."""
    inside = {id(sp) for sp, _s in attribution.overlaps(spans, windows)}
    return [sp for sp in spans if id(sp) not in inside]


def _stops(meta: dict[str, Any]) -> list[tuple[float, float]]:
    """When the job was stopped by a signal, on the monotonic clock (run.json's ``suspended``)."""
    held, launched = meta.get("suspended"), meta.get("t_launch")
    if not isinstance(held, dict) or not isinstance(launched, (int, float)):
        return []
    out = []
    for span in held.get("spans") or []:
        at, length = (span.get(k) if isinstance(span, dict) else None for k in ("at_s", "for_s"))
        if isinstance(at, (int, float)) and isinstance(length, (int, float)):
            out.append((launched + at, launched + at + length))
    return out


class StepEnds(Sequence[float]):
    """The steps' end times in monotonic seconds, read off the step column (µs from ``t0``) as
    they are asked for: a day-long run's million steps as a list of floats took 32 MB."""

    def __init__(self, t0: float, ts: Sequence[int]) -> None:
        self.t0, self.ts = t0, ts

    def __len__(self) -> int:
        return len(self.ts)

    @overload
    def __getitem__(self, i: int) -> float: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[float]: ...

    def __getitem__(self, i: int | slice) -> float | Sequence[float]:
        if isinstance(i, slice):
            return [self.t0 + t / 1e6 for t in self.ts[i]]
        return self.t0 + self.ts[i] / 1e6
