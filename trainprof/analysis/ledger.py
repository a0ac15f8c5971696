"""One time ledger: where the main process's steady wall time went, split once into disjoint
buckets on the host clock. Pure.

Every finding claims buckets from this ledger and a second is never claimed twice, so the
impacts of all findings add up to at most 100 %, and the report shows the ledger itself as the
breakdown the findings cite. The split, per steady step (a step runs from the previous
optimizer step to its own):

1. ``save`` and ``eval``: the parts of the step inside a checkpoint save (``torch.save``, safetensors, Lightning's) or an evaluation
   (probe intervals, exact).
2. Data: the step's wait in ``DataLoader.__next__`` beyond what an evaluation's own loader
   waited. Of it: ``sampler`` (the main-process sampler), ``worker_start`` (an epoch's first
   batches while workers start), the main process's own ``fetch`` (``__getitem__``),
   ``collate`` and ``pin`` (with ``num_workers=0``: probe per-batch times × steady batches),
   and the rest: ``transfer`` (receiving the workers' batches, by the share of the main
   thread's loader samples spent rebuilding or unpickling them) and ``data_wait`` (waiting on
   workers, or the loader's own Python machinery).
3. Stalls: a stalled step's time beyond a median step, by cause (``stall_compute``,
   ``stall_blocked``, ``stall_wait``, ``compile``).
4. The rest is the step itself, split by the main thread's stack samples outside stalls:
   ``forward``, ``backward``, ``optimizer``, ``anomaly``, ``sync``, ``logging``, ``loop``,
   ``idle``; without
   stack samples it stays one ``step`` bucket, said to be unsplit.
5. ``cpu_wait``: the time the loop's thread was ready to run but waited for a CPU (the kernel's
   run-queue delay, schedstat), beyond the stalls already counted as such (``stall_wait``).
   A stack sample cannot tell a thread that runs from one waiting in the run queue, so the
   wait is taken out of the buckets the thread runs in (``RUNNING``), in proportion
   (``with_cpu_wait``): under another process's load it is the job's biggest bucket.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from trainprof.analysis.stats import tail

DATA = ("sampler", "worker_start", "fetch", "collate", "pin", "transfer", "data_wait")
STALLS = ("save", "eval", "stall_compute", "stall_blocked", "stall_wait", "compile")
STEP = ("forward", "backward", "optimizer", "anomaly", "sync", "logging", "loop", "idle", "step")
CPU = ("cpu_wait",)
BUCKETS = CPU + DATA + STALLS + STEP + ("unattributed",)
# The buckets the loop's thread runs in, where it can wait, runnable, for a CPU: not asleep or
# blocked on a queue (idle, waiting on workers, a blocked stall), nor a wait counted already.
RUNNING = (
    "sampler", "fetch", "collate", "pin", "transfer", "save", "eval", "stall_compute",
    "compile", "forward", "backward", "optimizer", "anomaly", "sync", "logging", "loop", "step",
    "unattributed",
)  # fmt: skip

DESCRIPTION: dict[str, str] = {
    "cpu_wait": "waiting for a CPU: the loop's thread ready to run (the kernel's run queue)",
    "sampler": "the sampler, in the main process",
    "worker_start": "first batches of an epoch while workers start",
    "fetch": "dataset __getitem__, in the main process",
    "collate": "collate_fn, in the main process",
    "pin": "pin_memory, in the main process",
    "transfer": "receiving batches from workers (their tensors one by one, or unpickled)",
    "data_wait": "DataLoader: waiting on workers, or its own code",
    "save": "checkpoint saves (torch.save, safetensors, Lightning's)",
    "eval": "evaluation between steps",
    "stall_compute": "stalls: CPU work in the loop",
    "stall_blocked": "stalls: blocked waiting (I/O, sleep, lock, network)",
    "stall_wait": "stalls: waiting for a CPU (a CPU quota, other threads or processes)",
    "compile": "torch.compile compiling",
    "forward": "forward",
    "backward": "backward",
    "optimizer": "optimizer step",
    "anomaly": "autograd anomaly detection (a stack kept per op)",
    "sync": "device→host syncs (.item(), .cpu())",
    "logging": "printing and logging",
    "loop": "other host work in the loop",
    "idle": "main thread idle (sleeping or waiting)",
    "step": "forward/backward/optimizer and loop code (not split)",
    "unattributed": "step time the stack samples did not cover",
}


def label(bucket: str, streamed: bool = False) -> str:
    """A bucket's description; ``streamed``: the training loader's dataset is an
    IterableDataset, whose samples are made in ``__iter__``."""
    if bucket == "fetch" and streamed:
        return "dataset __iter__ (its samples), in the main process"
    return DESCRIPTION[bucket]


# Stack categories (attribution.category) → the step bucket they fill.
CATEGORY_BUCKET = {
    "forward": "forward",
    "backward": "backward",
    "optimizer": "optimizer",
    "anomaly": "anomaly",
    "sync": "sync",
    "logging": "logging",
    "other": "loop",
    "idle": "idle",
    "compile": "compile",
}
# A sync stall (the host waiting in .item() for a GPU that drains its queue) is sync time.
STALL_BUCKET = {
    "checkpoint": "save",  # the rest of the call that saves: its fsync, copy, rename
    "cpu": "stall_compute",
    "blocked": "stall_blocked",
    "wait": "stall_wait",
    "compile": "compile",
    "sync": "sync",
    "logging": "logging",  # a stall formatting or logging (a whole tensor in a log line)
}


@dataclass(frozen=True)
class Ledger:
    """Seconds per bucket over the steady window; the buckets never overlap."""

    window_s: float
    seconds: Mapping[str, float]
    step_split: str  # how the step's own time was split: "stack samples" | "not split"

    def get(self, *buckets: str) -> float:
        return sum(self.seconds.get(b, 0.0) for b in buckets)

    def share(self, *buckets: str) -> float:
        return self.get(*buckets) / self.window_s if self.window_s > 0 else 0.0

    def to_json(self) -> dict[str, object]:
        return {
            "clock": "host",
            "window_s": round(self.window_s, 6),
            "step_split": self.step_split,
            "buckets": {
                b: {"seconds": round(s, 6), "share": round(self.share(b), 4)}
                for b, s in self.seconds.items()
                if s > 0
            },
        }


@dataclass(frozen=True)
class StepCols:
    """The steady steps of the main process: end times (µs since t0), durations and waits."""

    t0: float  # the process's monotonic origin
    t: Sequence[int]
    dur: Sequence[int]
    wait: Sequence[int]
    sampler: Sequence[int]
    fetches: Sequence[int]
    first: int  # index of the first steady step


@dataclass(frozen=True)
class StallSpan:
    index: int
    excess_s: float
    cause: str  # "cpu" | "blocked" | "compile" | "data" | "eval" | "checkpoint"


@dataclass(frozen=True)
class MainFetch:
    """Per-batch cost of loading in the main process (num_workers=0), from the probe."""

    getitem_s: float
    collate_s: float
    pin_s: float


def build(
    cols: StepCols,
    *,
    saves: Iterable[tuple[float, float]],
    evals: Iterable[tuple[float, float]],
    stalls: Iterable[StallSpan],
    epoch_first_steps: Iterable[int],
    main_fetch: MainFetch | None,
    step_profile: Mapping[str, float] | None,
    min_profile_s: float = 0.0,
    transfer_frac: float = 0.0,
    compiles: Sequence[tuple[float, float]] = (),
) -> Ledger:
    n = len(cols.t)
    lo = cols.first
    window = sum(tail(cols.dur, lo)) / 1e6
    saves, evals = list(saves), list(evals)
    save_at = _overlap_per_step(cols, saves)
    eval_at = _overlap_per_step(cols, evals)
    # torch.compile's compiles as the probe timed them; one inside an evaluation or a save is
    # that evaluation's or save's time (the first evaluation compiles its no-grad graph)
    compile_at = _overlap_per_step(cols, _minus(compiles, saves + evals))
    wait_total = sum(tail(cols.wait, lo)) / 1e6
    sampler_total = sum(tail(cols.sampler, lo)) / 1e6
    # The few steps that hold an eval or a save: their data wait is only what the eval's own
    # loader did not wait, and no more than the step's time outside the eval and the save.
    data = wait_total
    for i in set(eval_at) | set(save_at):
        w = cols.wait[i] / 1e6
        room = max(0.0, cols.dur[i] / 1e6 - eval_at.get(i, 0.0) - save_at.get(i, 0.0))
        data -= w - min(max(0.0, w - eval_at.get(i, 0.0)), room)
    sampler = sampler_total
    sampler = min(sampler, data)
    seconds = dict.fromkeys(BUCKETS, 0.0)
    seconds["save"] = sum(save_at.values())
    seconds["eval"] = sum(eval_at.values())
    seconds["compile"] = sum(compile_at.values())
    seconds["sampler"] = sampler
    start = 0.0
    for i in sorted(set(epoch_first_steps)):
        if lo <= i < n and i not in eval_at:
            start += max(0.0, (cols.wait[i] - cols.sampler[i]) / 1e6)
    start = min(start, data - sampler)
    seconds["worker_start"] = start
    loading = data - sampler - start
    if main_fetch is not None and loading > 0:
        batches = sum(tail(cols.fetches, lo))
        parts = {
            "fetch": main_fetch.getitem_s * batches,
            "collate": main_fetch.collate_s * batches,
            "pin": main_fetch.pin_s * batches,
        }
        scale = min(1.0, loading / sum(parts.values())) if sum(parts.values()) > 0 else 0.0
        for k, v in parts.items():
            seconds[k] = v * scale
            loading -= v * scale
    seconds["transfer"] = max(0.0, loading) * transfer_frac
    seconds["data_wait"] = max(0.0, loading) - seconds["transfer"]
    for st in stalls:
        bucket = STALL_BUCKET.get(st.cause)
        i = st.index
        if bucket is None or not lo <= i < n:
            continue
        counted = save_at.get(i, 0.0) + eval_at.get(i, 0.0) + compile_at.get(i, 0.0)
        own = cols.dur[i] / 1e6 - counted - cols.wait[i] / 1e6  # counted above, as measured
        seconds[bucket] += max(0.0, min(st.excess_s - counted, own))
    rest = window - sum(seconds.values())
    split = "not split"
    sampled = sum(s for c, s in (step_profile or {}).items() if c in CATEGORY_BUCKET)
    if 0 < sampled < min_profile_s:
        # A handful of samples between stalls (a sample or two per gap of a few short steps)
        # would give the whole step to whatever they caught: keep it one bucket.
        step_profile = None
    if step_profile:
        shares = {
            CATEGORY_BUCKET[c]: s for c, s in step_profile.items() if c in CATEGORY_BUCKET and s > 0
        }
        total = sum(shares.values())
        if total > 0 and rest > 0:
            split = "stack samples"
            for b, s in shares.items():
                seconds[b] += rest * s / total
            rest = 0.0
    # No stack samples: the step stays one bucket. Samples that saw only data loading: the
    # rest of the step is time nothing accounts for.
    seconds["step" if step_profile is None else "unattributed"] = max(0.0, rest)
    return Ledger(window, seconds, split)


def with_cpu_wait(led: Ledger, runq: float) -> Ledger:
    """``led`` with the loop's thread's wait for a CPU (``runq``: its share of the window) as
    its own bucket, taken from the running buckets in proportion; stalls counted as waits
    already (``stall_wait``) are part of it."""
    pool = {b: led.seconds.get(b, 0.0) for b in RUNNING if led.seconds.get(b, 0.0) > 0}
    total = sum(pool.values())
    wait = min(total, max(0.0, runq * led.window_s - led.get("stall_wait")))
    if wait <= 0:
        return led
    seconds = dict(led.seconds)
    for b, s in pool.items():
        seconds[b] = s - s * wait / total
    seconds["cpu_wait"] = seconds.get("cpu_wait", 0.0) + wait
    return Ledger(led.window_s, seconds, led.step_split)


def _minus(
    segments: Sequence[tuple[float, float]], holes: Sequence[tuple[float, float]]
) -> list[tuple[float, float]]:
    """``segments`` with the time inside any of ``holes`` taken out."""
    out = []
    for a, b in segments:
        pieces = [(a, b)]
        for h0, h1 in holes:
            pieces = [
                p
                for x0, x1 in pieces
                for p in ((x0, min(x1, h0)), (max(x0, h1), x1))
                if p[1] > p[0]
            ]
        out.extend(pieces)
    return out


def _overlap_per_step(cols: StepCols, segments: Iterable[tuple[float, float]]) -> dict[int, float]:
    """Seconds of each steady step spent inside the segments (steps are in time order; a step
    ends at t[i] and starts at t[i] - dur[i])."""
    out: dict[int, float] = {}
    for a, b in segments:
        lo_us, hi_us = int((a - cols.t0) * 1e6), int((b - cols.t0) * 1e6)
        i = max(bisect.bisect_right(cols.t, lo_us), cols.first)
        while i < len(cols.t) and cols.t[i] - cols.dur[i] < hi_us:
            s0, s1 = cols.t[i] - cols.dur[i], cols.t[i]
            inside = (min(s1, hi_us) - max(s0, lo_us)) / 1e6
            if inside > 0:
                out[i] = min(cols.dur[i] / 1e6, out.get(i, 0.0) + inside)
            i += 1
    return out


Want = tuple[tuple[str, float], ...]  # (bucket, fraction of it) a finding claims


def allocate(ledger: Ledger, wants: Mapping[str, Want]) -> dict[str, dict[str, float]]:
    """Seconds each finding gets: the biggest claim is served first (ties by id, so the result
    never depends on the order rules ran in), and a bucket's seconds go to one finding only."""
    left = dict(ledger.seconds)

    def wanted(key: str) -> float:
        return sum(ledger.seconds.get(b, 0.0) * f for b, f in wants[key])

    out: dict[str, dict[str, float]] = {}
    for key in sorted(wants, key=lambda k: (-wanted(k), k)):
        got: dict[str, float] = {}
        for bucket, frac in wants[key]:
            take = min(left.get(bucket, 0.0), ledger.seconds.get(bucket, 0.0) * frac)
            if take > 0:
                got[bucket] = take
                left[bucket] -= take
        out[key] = got
    return out


def transfer_frac(data_parts: Mapping[str, float], min_s: float) -> float:
    """The share of the loader's remaining wait (beyond the sampler, start-up and main-process
    loading) spent receiving the workers' batches, from the main thread's loader samples; 0
    with fewer than ``min_s`` seconds of such samples to judge by."""
    transfer = data_parts.get("transfer", 0.0)
    waiting = transfer + data_parts.get("data_wait", 0.0)
    return transfer / waiting if waiting >= min_s and waiting > 0 else 0.0
