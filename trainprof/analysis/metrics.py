"""Metrics: the numbers every rule and renderer reads, built by from_steps or from_stacks.

Steady state: the first steps carry start-up (imports, the first optimizer construction that
imports torch._dynamo, worker start, allocator warm-up), so the first ``warmup_steps`` are
excluded — at least 1, 5 % of the steps, at most 20 — and the metrics say how many and how
long. With fewer than ``MIN_STEADY`` steady steps there is no steady state; one shorter than
``MIN_STEADY_S`` is judged only with ``ENOUGH_STEPS`` steps over ``MIN_ENOUGH_S`` (28 ms of a
run say nothing about its input pipeline; 492 timed steps in 0.97 s do).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainprof.analysis import attribution
from trainprof.analysis.compiles import CompileLog
from trainprof.analysis.cpu_starvation import CpuStarvation
from trainprof.analysis.debug_modes import DebugModes
from trainprof.analysis.device import (
    HOST_WORK_NAMES,
    Bottleneck,
    DeviceView,
)
from trainprof.analysis.ledger import Ledger
from trainprof.analysis.memory import Growth
from trainprof.analysis.mfu import Mfu
from trainprof.analysis.outside_view import OutsideView
from trainprof.analysis.ranks import RankView
from trainprof.analysis.stalls import (
    Segment,
    Stall,
)
from trainprof.analysis.usercode import is_user_path
from trainprof.analysis.worker_load import WorkerLoad
from trainprof.store.gpus import JobGpus
from trainprof.store.host_totals import OwnCost, PeakMemory
from trainprof.store.stacks import Frame, StackSpan

MIN_STEADY = 5
MIN_STEADY_S = 1.0  # a steady state this long is judged, whatever its step count
# ...and one of this many timed steps over at least this long: evidence enough for shares of
# the step (492 steps in 0.97 s were once left unjudged while 37 % of them printed)
ENOUGH_STEPS = 100
MIN_ENOUGH_S = 0.25
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
class BatchKind:
    """What a batch the main process made holds, by how a worker would hand it over."""

    tensors: int  # cross in shared memory
    arrays: int  # numpy arrays: pickled through a pipe, every byte
    other: int  # Python objects (numbers, strings, images): pickled too
    array_bytes: int


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
    # the first batch the main process made (num_workers=0), None where not recorded
    main_batch: BatchKind | None = None
    built: int = 1  # DataLoader objects built for it (a loop that builds its loader each epoch)
    # each pass's start to its first batch (monotonic s), as first_batch_waits_s
    first_batch_windows: tuple[tuple[float, float], ...] = ()

    @property
    def iterable(self) -> bool:
        """An IterableDataset: its samples come from ``__iter__``, not ``__getitem__``."""
        return self.config.get("iterable") is True

    @property
    def workers_persist(self) -> bool:
        """Its workers live across its passes: persistent_workers=True on one DataLoader, never
        rebuilt (a loader built again starts new workers whatever the setting)."""
        return bool(self.config.get("num_workers")) and bool(
            self.config.get("persistent_workers") and self.built <= 1
        )

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
    source: Mapping[tuple[str, int], str] = field(default_factory=dict)  # user lines' text
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
    # loop lines ordinary steps call forward/backward/optimizer from (call_sites.step_lines)
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
    # the job's peak memory: PSS summed over its processes where read, else RSS summed
    peak_memory: PeakMemory | None = None
    own_cost: OwnCost | None = None  # trainprof's own processes' CPU while the job ran
    gpu_util_mean: float | None = None  # over the job's GPUs (store/gpus.py)
    gpu_unavailable: str | None = None
    gpus: JobGpus | None = None  # which of the machine's GPUs those are
    # Every GPU NVML sees, with its mean utilization (the job's or not: gpu-unused reads it).
    machine_gpus: tuple[tuple[int, float | None], ...] = ()
    torch_seen: bool = False
    probe_missing: str | None = None  # why the probe did not load in the job (None: it did)
    # Event files of another version were not read (probe_errors says which): steps are missing.
    events_unread: bool = False
    # a DataLoader worker called get_worker_info() (None: no worker process was recorded)
    workers_asked_info: bool | None = None
    # (worker_id, checksum of its first batch) of the workers that read an IterableDataset
    workers_first_batches: tuple[tuple[int, int], ...] = ()
    exit_code: int | None = None
    stopped_by: str | None = None
    activity: Activity = field(default_factory=lambda: Activity(None))
    ledger: Ledger | None = None  # where the steady time went (None without a steady state)
    device: DeviceView | None = None  # timed steps on the GPU's clock (CUDA jobs)
    bottleneck: Bottleneck | None = None  # what bounds the step (on CPU: cpu_verdict.py)
    # a multi-rank job's collectives backend where they run on the GPU's streams (nccl): inside
    # the device's busy time, not measured apart
    collectives_on_device: str | None = None
    mfu: Mfu | None = None  # FLOPs of one counted step at the steady rate (CUDA jobs)
    # the job measured from outside alone (stacks, /proc, NVML): no probe in it timed steps
    outside: OutsideView | None = None
    stack_rate_hz: float | None = None  # py-spy's sampling rate (None: not recorded)

    @property
    def peak_rss_bytes(self) -> int | None:
        """The job's peak memory in bytes (``peak_memory``: on PSS where read); None: unsampled."""
        return self.peak_memory.bytes if self.peak_memory is not None else None

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


def warmup_steps(n: int) -> int:
    """Steps excluded as warm-up: at least 1, 5 % of the steps, at most 20 (none of none)."""
    return min(max(1, math.ceil(0.05 * n)), 20) if n else 0


HOST_WORK = tuple(HOST_WORK_NAMES)  # the host-work buckets, as the verdict names them
