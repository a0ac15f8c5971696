"""Session → Metrics: the numbers every rule and renderer reads. Pure: no I/O.

Steady state: the first steps carry start-up (imports, the first optimizer construction that
imports torch._dynamo, worker start, allocator warm-up), so the first ``warmup_steps`` are
excluded — at least 1, 5 % of the steps, at most 20 — and the metrics say how many and how
long. With fewer than ``MIN_STEADY`` steady steps there is no steady state; one shorter than
``MIN_STEADY_S`` is described (throughput, step times) but no rule judges it (28 ms of a run
say nothing about its input pipeline).
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from trainprof.analysis import attribution, compiles, debug_modes, frameworks, ledger
from trainprof.analysis import mfu as mfu_mod
from trainprof.analysis.compiles import CompileLog
from trainprof.analysis.cpu_starvation import CpuStarvation, cpu_starvation
from trainprof.analysis.debug_modes import DebugModes
from trainprof.analysis.device import (
    HOST_WORK_NAMES,
    Bottleneck,
    DeviceView,
    bottleneck,
    device_view,
)
from trainprof.analysis.ledger import DATA, Ledger
from trainprof.analysis.memory import Growth, growth
from trainprof.analysis.mfu import Mfu
from trainprof.analysis.outside_view import OutsideView
from trainprof.analysis.ranks import DEVICE_BACKENDS, RankView, backend_of, rank_views
from trainprof.analysis.stalls import (
    Segment,
    Stall,
    eval_segments,
    find_stalls,
    refine,
    save_segments,
    waits_for_a_cpu,
)
from trainprof.analysis.stats import bins, finite, int_percentiles, mean, scaled, tail
from trainprof.analysis.usercode import is_user_path
from trainprof.analysis.worker_load import WorkerLoad, busy_workers, worker_load
from trainprof.store.events import ProcessLog
from trainprof.store.gpus import JobGpus, machine_utils
from trainprof.store.session import Session
from trainprof.store.stacks import Frame, StackSpan

MIN_STEADY = 5
MIN_STEADY_S = 1.0
SPARK_BINS = 48
# Stack samples of the loop (outside stalls, saves, evaluations) needed to split the step into
# forward/backward/optimizer/loop code: with fewer, one or two samples would decide the split.
MIN_SPLIT_SAMPLES = 10


@dataclass(frozen=True)
class StepStats:
    count: int
    duration_s: float
    steps_per_s: float
    samples_per_s: float | None
    p50_s: float
    p95_s: float
    max_s: float
    data_wait_frac: float | None  # None: no DataLoader was iterated, so not measured
    sampler_frac: float
    wait_per_step_s: float
    fetches_per_step: float
    batch_size: int | None  # median leading dim of the first batch of a step
    samples_per_step: float | None


def batches_per_step(metrics: Metrics) -> int | None:
    """DataLoader batches per optimizer step (more than one: gradient accumulation); None
    without a DataLoader or an optimizer step."""
    steady = metrics.steady
    if steady is None or metrics.unit != "step" or steady.fetches_per_step < 1:
        return None
    return round(steady.fetches_per_step)


@dataclass(frozen=True)
class LoaderView:
    """Where a loader's batch time goes, from the probe's counters."""

    config: dict[str, Any]
    main_fetch_ms: float | None  # dataset __getitem__ + collate in the main process, per batch
    worker_fetch_ms: float | None  # the same, per batch, inside workers
    first_batch_waits_s: tuple[float, ...]  # one per epoch (iterator start)
    main_collate_ms: float | None = None  # the collate_fn part of main_fetch_ms
    worker_collate_ms: float | None = None  # the collate_fn part of worker_fetch_ms
    main_pin_ms: float | None = None  # pin_memory per batch in the main thread
    # a shuffling DistributedSampler's epoch at the start of each pass over the loader (empty:
    # no such sampler)
    sampler_epochs: tuple[int, ...] = ()

    @property
    def iterable(self) -> bool:
        """An IterableDataset: its samples come from ``__iter__``, not ``__getitem__``."""
        return self.config.get("iterable") is True

    @property
    def sample_method(self) -> str:
        return "__iter__" if self.iterable else "__getitem__"

    def code_at(self, which: str) -> str | None:
        """``file:line (name)`` of the dataset's __getitem__ (an IterableDataset's __iter__)
        or the collate_fn, if Python."""
        at = self.config.get(f"{which}_at")
        return f"{at[0]}:{at[1]} ({at[2]})" if at else None

    def user_code_at(self, which: str) -> str | None:
        """``code_at``, where it is the user's own code (not torch's, not a library's)."""
        at = self.config.get(f"{which}_at")
        return self.code_at(which) if at and is_user_path(str(at[0])) else None


@dataclass(frozen=True)
class Activity:
    """What happened over the run besides steps: stalls, saves, evals, stacks, memory, output."""

    window: tuple[float, float] | None  # steady window (monotonic), None without steady state
    run_span_s: float | None = None  # launch to the last step
    stalls: tuple[Stall, ...] = ()
    saves: tuple[tuple[Segment, int, str], ...] = ()  # segment, bytes, path
    evals: tuple[Segment, ...] = ()
    profile: attribution.Profile | None = None  # main-thread stacks in the steady window
    loop_profile: attribution.Profile | None = None  # the same, outside stalls, saves and evals
    train_wait_frac: float | None = None  # data wait over steady steps that overlap no eval
    train_step_s: float | None = None  # the mean of those steps (the loop's pace while training)
    spans: tuple[StackSpan, ...] = ()
    stacks_error: str | None = None
    growths: tuple[Growth, ...] = ()
    mem_total: int | None = None
    mem_available_min: float | None = None
    swap_total: int | None = None
    swap_used_max: float | None = None
    swap_io_bps_mean: float | None = None  # swap-in + swap-out, bytes/s, over the run
    output_lines: int | None = None
    output_bytes: int | None = None
    precision: dict[str, Any] | None = None  # device, dtype, TF32 settings at the first step
    autocast: tuple[str, ...] = ()  # "device:dtype" of each autocast context the job entered
    ranks: tuple[RankView, ...] = ()  # torchrun ranks with steps
    loop_funcs: frozenset[tuple[str, str]] = frozenset()  # user functions that drive torch
    # loop lines ordinary steps call forward/backward/optimizer from (attribution.step_lines)
    step_lines: frozenset[Frame] = frozenset()
    loader_caller: Frame | None = None  # the line asking the DataLoader, as the probe read it
    compile_s: float | None = None  # main-thread time compiling before the steady window
    compiles: CompileLog | None = None  # torch.compile's compiles as the probe timed them
    debug: DebugModes | None = None  # torch's debug switches as the probe read them
    main_cpu_in_stalls: float | None = None  # main process CPU % in samples inside stalls
    # With several optimizers: {"counted": label, "steps": {label: n}} (labels "Adam#0").
    optimizers: dict[str, Any] | None = None
    structure: dict[str, Any] | None = None  # the model and optimizer at the first step
    # the model's parameters with a gradient in no optimizer, at the first step (probe/optimized)
    unoptimized: dict[str, Any] | None = None
    zero_grad_kept: bool = False  # zero_grad(set_to_none=False) was called
    framework: str | None = None  # the training framework that runs the loop (frameworks.py)
    flops: dict[str, Any] | None = None  # the probe's FLOP count of one step, or why none
    timeline_error: str | None = None  # why the probe's device timeline stopped, if it did
    probe_errors: tuple[str, ...] = ()  # what the probe ran into and went past, once each

    @property
    def evals_in_window(self) -> tuple[Segment, ...]:
        """The evaluations that overlap the steady window."""
        w = self.window
        return () if w is None else tuple(e for e in self.evals if e.t1 > w[0] and e.t0 < w[1])

    @property
    def steps_wait_outside_evals(self) -> float | None:
        """The training steps' data-wait share outside evaluations, where evaluations ran in
        the steady window (None without any: then the steady steps' wait is the training's)."""
        return self.train_wait_frac if self.evals_in_window else None


@dataclass(frozen=True)
class Basis:
    """What the window's time split was measured from, in the words a finding's evidence uses."""

    by_stacks: bool  # stack samples alone (no probe timed the steps)
    of: str  # "the steady run" | "the sampled time"
    sampled: str  # "4.2 s of main-thread stack samples at 100 Hz"; "" by timed steps


@dataclass(frozen=True)
class Metrics:
    # "step" (optimizer steps), "batch" (a job without an optimizer) or "backward pass" (a
    # hand-written loop: neither an optimizer nor a DataLoader)
    unit: str
    total_steps: int
    warmup_steps: int
    warmup_s: float | None
    time_to_first_step_s: float | None
    steady: StepStats | None
    durations_s: Sequence[
        float
    ] = ()  # steady per-step times, an array('d') (for rules that need them)
    sparkline: tuple[float, ...] = ()
    loaders: tuple[LoaderView, ...] = ()
    usable_cpus: int | None = None
    cpu_percent_mean: float | None = None
    # trainprof's own processes (the runner or attach, and py-spy), % of one CPU, mean
    trainprof_cpu_percent_mean: float | None = None
    # the busy DataLoader workers' CPU use over the steady window (None: none was sampled)
    worker_load: WorkerLoad | None = None
    # the main thread's wait for a CPU over the steady window, and who took the CPUs (None:
    # not read: no schedstat, or no steady window)
    cpu_starvation: CpuStarvation | None = None
    peak_rss_bytes: int | None = None
    gpu_util_mean: float | None = None  # over the job's GPUs (store/gpus.py)
    gpu_unavailable: str | None = None
    gpus: JobGpus | None = None  # which of the machine's GPUs those are
    # Every GPU NVML sees, with its mean utilization (the job's or not: gpu-unused reads it).
    machine_gpus: tuple[tuple[int, float | None], ...] = ()
    torch_seen: bool = False
    probe_missing: str | None = None  # why the probe did not load in the job (None: it did)
    # a DataLoader worker called get_worker_info() (None: no worker process was recorded)
    workers_asked_info: bool | None = None
    # (worker_id, checksum of its first batch) of the workers that read an IterableDataset
    workers_first_batches: tuple[tuple[int, int], ...] = ()
    exit_code: int | None = None
    stopped_by: str | None = None
    activity: Activity = field(default_factory=lambda: Activity(None))
    ledger: Ledger | None = None  # where the steady time went (None without a steady state)
    device: DeviceView | None = None  # timed steps on the GPU's clock (CUDA jobs)
    bottleneck: Bottleneck | None = None  # what bounds a GPU job's step (None on CPU)
    # a multi-rank job's collectives backend where they run on the GPU's streams (nccl): inside
    # the device's busy time, not measured apart
    collectives_on_device: str | None = None
    mfu: Mfu | None = None  # FLOPs of one counted step at the steady rate (CUDA jobs)
    # the job measured from outside alone (stacks, /proc, NVML): no probe in it timed steps
    outside: OutsideView | None = None
    stack_rate_hz: float | None = None  # py-spy's sampling rate (None: not recorded)

    @property
    def basis(self) -> Basis:
        o = self.outside
        if o is None:
            return Basis(False, "the steady run", "")
        sampled = f"{o.sampled_s:.1f} s of main-thread stack samples at {o.rate_hz} Hz"
        return Basis(True, "the sampled time", sampled)

    @property
    def streams_data(self) -> bool:
        """The training loader (the first) reads an IterableDataset."""
        return bool(self.loaders) and self.loaders[0].iterable

    @property
    def on_cuda(self) -> bool:
        if self.outside is not None:
            # No probe: NVML listing a process of the job on a GPU says it runs CUDA work there.
            return self.gpus is not None and self.gpus.by == "pid"
        return trains_on_cuda(self.activity.precision)

    @property
    def device_idle(self) -> float | None:
        """The GPU's idle share of a step: from the device timeline, else from NVML (None on
        CPU jobs, or when neither was measured)."""
        if not self.on_cuda:
            return None
        if self.device is not None and self.device.idle_share is not None:
            return self.device.idle_share
        if self.gpu_util_mean is not None:
            return max(0.0, 1.0 - self.gpu_util_mean / 100.0)
        return None


def trains_on_cuda(precision: dict[str, Any] | None) -> bool:
    """The model's parameters were on a CUDA device at the first optimizer step."""
    return precision is not None and precision.get("device") == "cuda"


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


def warmup_steps(n: int) -> int:
    """Steps excluded as warm-up: at least 1, 5 % of the steps, at most 20 (none of none)."""
    return min(max(1, math.ceil(0.05 * n)), 20) if n else 0


def compute(session: Session) -> Metrics:
    meta = session.meta
    primary = session.primary
    unit, cols = _step_columns(primary)
    n = len(cols["t"]) if cols else 0
    flops = mfu_mod.flop_count(primary.infos) if primary else None
    # The step whose FLOPs were counted ran slow (each op through Python): warm-up, not data.
    warm = min(n, max(warmup_steps(n), mfu_mod.counted_steps(flops) if unit == "step" else 0))
    steady, durations = _steady(cols, warm) if n - warm >= MIN_STEADY else (None, ())
    if steady is not None and not (primary and primary.loaders):
        steady = dataclasses.replace(steady, data_wait_frac=None)
    t0 = primary.t0 if primary else 0.0
    launched = meta.get("t_launch")
    first_t = t0 + cols["t"][0] / 1e6 if n else None
    warm_end = t0 + cols["t"][warm - 1] / 1e6 if n and warm else None
    window = (warm_end, t0 + cols["t"][-1] / 1e6) if steady and warm_end else None
    loaders = _loaders(session, primary)
    activity = _activity(session, primary, warm, window, cols)
    starvation = cpu_starvation(
        session.samples,
        primary.pid if primary else None,
        window,
        meta.get("usable_cpus"),
        meta.get("cpu_count"),
    )
    if starvation is not None and activity.stalls:
        waits = waits_for_a_cpu(list(activity.stalls), activity.spans, window, starvation.runq)
        activity = dataclasses.replace(activity, stalls=tuple(waits))
    if steady is not None and activity.evals and primary is not None:
        steady = _without_eval_samples(steady, cols, warm, activity.evals, primary.t0)
    rate = session.stack_rate_hz
    min_profile_s = MIN_SPLIT_SAMPLES / rate if rate else 0.0
    led = (
        _ledger(primary, cols, warm, activity, loaders, min_profile_s)
        if window and primary
        else None
    )
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
        usable_cpus=meta.get("usable_cpus"),
        cpu_percent_mean=_window_mean(session, session.samples.tree_cpu, window),
        trainprof_cpu_percent_mean=_window_mean(session, session.samples.self_cpu, window),
        worker_load=worker_load(
            session.samples, busy_workers(session.workers, session.samples), window
        ),
        cpu_starvation=starvation,
        peak_rss_bytes=_peak(session.samples.tree_rss),
        gpu_util_mean=gpu_util,
        gpu_unavailable=session.samples.gpu_unavailable,
        gpus=session.samples.job_gpus,
        machine_gpus=machine_utils(session.samples, window),
        torch_seen=any(p.torch_imported_us is not None for p in session.processes),
        probe_missing=_probe_missing(meta),
        workers_asked_info=_workers_asked_info(session),
        workers_first_batches=_workers_first_batches(session),
        exit_code=meta.get("exit_code"),
        stopped_by=meta.get("stopped_by"),
        activity=activity,
        ledger=led,
        device=device,
        collectives_on_device=comm,
        bottleneck=_bottleneck(led, device, gpu_util, comm) if cuda and led else None,
        mfu=mfu_mod.mfu(
            flops, steady.steps_per_s if steady else None, activity.precision, activity.autocast
        ),
        stack_rate_hz=rate,
    )


HOST_WORK = tuple(HOST_WORK_NAMES)  # the host-work buckets, as the verdict names them


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
        epoch_first_steps=_epoch_first_steps(log)
        if main and main.config.get("num_workers")
        else (),
        main_fetch=fetch,
        step_profile=a.loop_profile.seconds if a.loop_profile is not None else None,
        min_profile_s=min_profile_s,
        transfer_frac=ledger.transfer_frac(a.loop_profile.data_parts, min_profile_s)
        if a.loop_profile is not None
        else 0.0,
    )


def _epoch_first_steps(log: ProcessLog) -> list[int]:
    """Each worker's first batch of an epoch carries that worker's start-up: the first
    num_workers steps after every epoch start of the training loader."""
    ts = log.steps["t"]
    workers = _num_workers(log)
    out: list[int] = []
    for key, t_iter, _w in log.epochs:
        if key == training_loader_key(log):
            i = bisect.bisect_right(ts, t_iter)
            out.extend(range(i, min(i + workers, len(ts))))
    return out


def _num_workers(log: ProcessLog) -> int:
    """The training loader's workers, at least 1 (a corrupt count reads as 1)."""
    n = (log.loaders.get(0) or {}).get("num_workers")
    return n if isinstance(n, int) and 1 <= n <= 1024 else 1


def training_loader_key(log: ProcessLog) -> int:
    """The loader that feeds training: the last one to start an epoch before the first step
    (a sanity-check validation loader may start earlier, but it has finished by then)."""
    ts = log.steps["t"]
    first = ts[0] if len(ts) else None
    key = 0
    for k, t_iter, _w in log.epochs:
        if first is not None and t_iter > first:
            break
        key = k
    return key


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
    compile_log = compiles.read(primary) if primary else None
    if primary is not None and stalls:
        train_key = training_loader_key(primary)
        others = sorted(primary.t0 + t / 1e6 for k, t, _w in primary.epochs if k != train_key)
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
    roles = {p.pid: p.role for p in session.processes}
    growths = []
    if window is not None:  # start-up (imports, allocator warm-up) always grows memory
        for pid, series in samples.procs.items():
            g = growth(series, roles.get(pid, "other"), *window)
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
        step_lines=attribution.step_lines(loop_spans, session.source, loop_funcs),
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
                str(i["probe_error"])
                for p in session.processes
                for i in p.infos
                if "probe_error" in i
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


def _step_columns(primary: ProcessLog | None) -> tuple[str, dict[str, Any]]:
    if primary is None:
        return "step", {}
    if primary.n_steps:
        return "step", primary.steps
    b = primary.batches
    if not len(b["t"]):
        return _backward_columns(primary.backwards)
    # A job without an optimizer: each batch is a step; its duration is the gap between batches.
    ts = b["t"]
    return "batch", {
        "t": ts,
        "dur": _gaps(ts),
        "wait": b["wait"],
        "sampler": b["sampler"],
        "batch_size": b["batch_size"],
        "fetches": [1] * len(ts),
        "samples": [max(x, 0) for x in b["batch_size"]],
    }


def _backward_columns(ts: array[int]) -> tuple[str, dict[str, Any]]:
    """A hand-written loop (no torch.optim step, no DataLoader): each backward() is a step, its
    duration the gap between two returns; no data wait, no batch size measured."""
    if not len(ts):
        return "step", {}
    n = len(ts)
    return "backward pass", {
        "t": ts,
        "dur": _gaps(ts),
        "wait": [0] * n,
        "sampler": [0] * n,
        "batch_size": [-1] * n,
        "fetches": [0] * n,
        "samples": [0] * n,
    }


def _gaps(ts: Sequence[int]) -> list[int]:
    """Durations of events recorded only by their end: the first from the process's start."""
    return [ts[0]] + [ts[i] - ts[i - 1] for i in range(1, len(ts))]


def _steady(cols: dict[str, Any], warm: int) -> tuple[StepStats, array[float]]:
    """Steady-state statistics. Per-step values stay in typed arrays (8 bytes a step, not a
    32-byte float object plus a pointer), read in place (no slices), and the percentiles
    are selected from the integer columns (``int_percentiles``), not a sorted copy: a
    million-step run keeps this to the 8 MB of the durations it returns."""
    t = cols["t"]
    durs = scaled(cols["dur"], warm, 1e6)
    count = len(durs)
    total = math.fsum(durs)
    span = (t[-1] - t[warm - 1]) / 1e6 if warm else total
    waits = sum(tail(cols["wait"], warm))
    n_samples = sum(filter((0).__lt__, tail(cols["samples"], warm)))
    n_bs = sum(map((0).__lt__, tail(cols["batch_size"], warm)))  # batch sizes > 0
    p50, p95 = int_percentiles(cols["dur"], (50, 95), start=warm, scale=1e6)
    return (
        StepStats(
            count=count,
            duration_s=span,
            steps_per_s=count / span if span > 0 else math.nan,
            samples_per_s=n_samples / span if n_samples and span > 0 else None,
            p50_s=p50,
            p95_s=p95,
            max_s=max(durs),
            data_wait_frac=min(1.0, waits / 1e6 / total) if total > 0 else 0.0,
            sampler_frac=min(1.0, sum(tail(cols["sampler"], warm)) / 1e6 / total)
            if total > 0
            else 0.0,
            wait_per_step_s=waits / 1e6 / count,
            fetches_per_step=int_percentiles(cols["fetches"], (50,), start=warm)[0],
            batch_size=int(int_percentiles(cols["batch_size"], (50,), start=warm, low=1)[0])
            if n_bs
            else None,
            samples_per_step=n_samples / count if n_samples else None,
        ),
        durs,
    )


def _without_eval_samples(
    steady: StepStats, cols: dict[str, Any], warm: int, evals: Sequence[Segment], t0: float
) -> StepStats:
    """A step that holds an evaluation counted the evaluation loader's batches as its samples
    (a Trainer's run read 2,445 samples/s for 872): such a step counts a typical step's."""
    samples, t, dur = cols["samples"], cols["t"], cols["dur"]
    typical = int_percentiles(samples, (50,), start=warm)[0] if len(samples) > warm else 0
    extra = 0
    for g in evals:
        lo = bisect.bisect_left(t, int((g.t0 - t0) * 1e6))  # the first step ending after it starts
        for i in range(max(lo, warm), len(t)):
            if t[i] - dur[i] >= (g.t1 - t0) * 1e6:
                break
            extra += max(0, samples[i] - typical)
    if not extra or not steady.samples_per_s or not steady.samples_per_step:
        return steady
    n = steady.samples_per_step * steady.count - extra
    return dataclasses.replace(
        steady,
        samples_per_s=n / steady.duration_s if steady.duration_s > 0 else None,
        samples_per_step=n / steady.count,
    )


def _loaders(session: Session, primary: ProcessLog | None) -> tuple[LoaderView, ...]:
    if primary is None:
        return ()
    workers = session.workers
    w_count = sum(w.fetch_count for w in workers)
    w_us = sum(w.fetch_us for w in workers)
    w_collate = sum(w.collate_us for w in workers)
    views = []
    for key, cfg in sorted(primary.loaders.items()):
        uses_workers = (cfg.get("num_workers") or 0) > 0
        main_ms = (
            primary.fetch_us / primary.fetch_count / 1e3
            if primary.fetch_count and not uses_workers
            else None
        )
        worker_ms = w_us / w_count / 1e3 if w_count and uses_workers else None
        firsts = tuple(w / 1e6 for k, _t, w in primary.epochs if k == key)
        sampler_epochs = tuple(
            int(i["sampler_epoch"][1])
            for i in primary.infos
            if isinstance(i.get("sampler_epoch"), list)
            and len(i["sampler_epoch"]) == 2
            and i["sampler_epoch"][0] == key
            and type(i["sampler_epoch"][1]) is int
        )
        views.append(
            LoaderView(
                cfg,
                main_ms,
                worker_ms,
                firsts,
                main_collate_ms=primary.collate_us / primary.fetch_count / 1e3
                if main_ms is not None
                else None,
                worker_collate_ms=w_collate / w_count / 1e3 if worker_ms is not None else None,
                main_pin_ms=primary.pin_us / primary.fetch_count / 1e3
                if main_ms is not None
                else None,
                sampler_epochs=sampler_epochs,
            )
        )
    return tuple(views)


def _window_mean(session: Session, series: Any, window: tuple[float, float] | None) -> float | None:
    ts = session.samples.t
    if window is not None:
        vals = finite(v for t, v in zip(ts, series, strict=True) if window[0] <= t <= window[1])
        if vals:
            return mean(vals)
    vals = finite(series)
    return mean(vals) if vals else None


def _peak(series: Any) -> int | None:
    vals = finite(series)
    return int(max(vals)) if vals else None


def _train_wait(
    log: ProcessLog, warm: int, evals: list[Segment]
) -> tuple[float | None, float | None]:
    """Data-wait share of steady steps that contain no evaluation and no epoch start (an eval
    loader's wait is the eval's cost, not the training input pipeline's), and their mean
    duration in seconds."""
    ts, durs, waits = log.steps["t"], log.steps["dur"], log.steps["wait"]
    # Each worker's first batch of an epoch carries that worker's start-up: worker-startup's
    # cost, not the steady input pipeline's. Skip the first num_workers steps of every epoch.
    workers = _num_workers(log)
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
