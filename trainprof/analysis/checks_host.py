"""Rules about host work and resources: logging, loop overhead, memory, swap, GPU idleness."""

from __future__ import annotations

from trainprof.analysis.attribution import where
from trainprof.analysis.checks_loader import ms
from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics

# logging-overhead: printing/logging/tensor formatting holds the main thread this share of the
# loop, with at least LOG_LINES_PER_STEP lines of output per step on average.
LOGGING_SHARE = 0.05
LOG_LINES_PER_STEP = 0.5
# loop-overhead: other host work in the loop (not forward/backward/optimizer/data/logging).
LOOP_SHARE = 0.25
# memory-growth: a steady linear rise (R² >= 0.8) of at least this rate and total.
GROWTH_MIN_BPS = 1 * 2**20  # 1 MB/s (60 MB/min) — any run
GROWTH_SLOW_BPS = 5 * 2**20 / 60  # 5 MB/min — when the run is long enough to see it
GROWTH_SLOW_MIN_S = 300
GROWTH_MIN_TOTAL = 50 * 2**20
# ... and it is an error when, at that rate, the available memory runs out within this time.
GROWTH_EXHAUST_ERROR_S = 3600
# swap-pressure: swap traffic averaged over the run.
SWAP_IO_BPS = 1 * 2**20
# gpu-underutilized: mean utilization below this, with no more specific cause found.
GPU_UTIL_LOW = 50.0

MB = 2**20


def check_logging_overhead(m: Metrics) -> Finding | None:
    prof = m.activity.loop_profile or m.activity.profile
    lines = m.activity.output_lines
    if prof is None or not m.total_steps or lines is None:
        return None
    per_step = lines / m.total_steps
    share = prof.share("logging")
    if share < LOGGING_SHARE or per_step < LOG_LINES_PER_STEP:
        return None
    frame = prof.top_line("logging")
    out_bytes = (m.activity.output_bytes or 0) / m.total_steps
    return Finding(
        id="logging-overhead",
        severity="warning",
        title=f"Per-step logging takes {share:.0%} of the training loop",
        evidence=(
            f"{per_step:.1f} lines ({out_bytes:.0f} bytes) of output per step, {lines} lines in all",
            f"the main thread spent {share:.0%} of the steady loop printing, logging or "
            "formatting tensors",
        ),
        fix=(
            "log every N steps (if step % 100 == 0: ...), not every step",
            "format numbers, not tensors: accumulate loss on the device and call .item() "
            "only when you log",
        ),
        impact=share,
        where=where(frame),
    )


def check_loop_overhead(m: Metrics) -> Finding | None:
    prof = m.activity.loop_profile
    if prof is None:
        return None
    share = prof.share("other")
    if share < LOOP_SHARE:
        return None
    frame = prof.top_line("other")
    busy = {k: v for k, v in prof.seconds.items() if v > 0}
    parts = ", ".join(
        f"{k} {v / prof.total:.0%}" for k, v in sorted(busy.items(), key=lambda kv: -kv[1])
    )
    return Finding(
        id="loop-overhead",
        severity="warning",
        title=f"Host work outside forward/backward/optimizer takes {share:.0%} of the loop",
        evidence=(
            f"main-thread time in the steady loop: {parts}",
            "'other' is code in the loop itself: per-step metrics, gradient norms, "
            "Python bookkeeping",
        ),
        fix=(
            "do per-step extras every N steps (metrics, grad norms, histograms)",
            "use the fused built-ins: torch.nn.utils.clip_grad_norm_ / torch._foreach_norm "
            "instead of a Python loop over parameters",
        ),
        impact=share,
        where=where(frame),
    )


def check_memory_growth(m: Metrics) -> Finding | None:
    growing = []
    for g in m.activity.growths:
        total = g.end_bytes - g.start_bytes
        fast = g.bytes_per_s >= GROWTH_MIN_BPS
        slow = g.bytes_per_s >= GROWTH_SLOW_BPS and g.seconds >= GROWTH_SLOW_MIN_S
        if g.r2 >= 0.8 and total >= GROWTH_MIN_TOTAL and (fast or slow):
            growing.append(g)
    if not growing:
        return None
    growing.sort(key=lambda g: -g.bytes_per_s)
    rate = sum(g.bytes_per_s for g in growing)
    evidence = [
        f"{g.role} process {g.pid}: {g.metric.upper()} {g.start_bytes / MB:.0f} → "
        f"{g.end_bytes / MB:.0f} MB over {g.seconds:.0f} s ({g.bytes_per_s * 60 / MB:.0f} MB/min, "
        f"steady: R²={g.r2:.2f})"
        for g in growing[:6]
    ]
    avail = m.activity.mem_available_min
    exhaust_s = avail / rate if avail is not None and rate > 0 else None
    if avail is not None and rate > 0:
        evidence.append(
            f"at {rate * 60 / MB:.0f} MB/min the {avail / MB:.0f} MB still available "
            f"run out in about {avail / rate / 60:.0f} min"
        )
    workers = any(g.role == "worker" for g in growing)
    fix = [
        "bound in-memory caches: functools.lru_cache(maxsize=...) or an LRU dict with a size limit",
        "do not append tensors that still hold the graph (store loss.item(), not loss)",
    ]
    if workers:
        fix.insert(
            0,
            "each DataLoader worker keeps its own copy of a cache filled in __getitem__: cache "
            "before training in the main process, in numpy arrays (not Python lists/dicts, whose "
            "refcounts copy pages on fork), or use a shared memory store",
        )
    return Finding(
        id="memory-growth",
        severity="error"
        if exhaust_s is not None and exhaust_s < GROWTH_EXHAUST_ERROR_S
        else "warning",
        title=f"Host memory grows steadily ({rate * 60 / MB:.0f} MB/min)",
        evidence=tuple(evidence),
        fix=tuple(fix),
        impact=None,
    )


def check_swap_pressure(m: Metrics) -> Finding | None:
    io = m.activity.swap_io_bps_mean
    if io is None or io < SWAP_IO_BPS:
        return None
    used = m.activity.swap_used_max
    return Finding(
        id="swap-pressure",
        severity="warning",
        title=f"The machine is swapping during training ({io / MB:.1f} MB/s)",
        evidence=(
            f"swap traffic averaged {io / MB:.1f} MB/s (in + out) over the run",
            f"swap used peaked at {(used or 0) / MB:.0f} MB of {(m.activity.swap_total or 0) / MB:.0f} MB",
        ),
        fix=(
            "use less host memory: fewer DataLoader workers, smaller prefetch_factor, "
            "bounded caches, smaller batches",
            "or run on a machine with more RAM; swapping makes every step unpredictable",
        ),
        impact=None,
    )


def check_gpu_underutilized(m: Metrics) -> Finding | None:
    util = m.gpu_util_mean
    if util is None or util >= GPU_UTIL_LOW:
        return None
    s = m.steady
    assert s is not None
    return Finding(
        id="gpu-underutilized",
        severity="warning",
        title=f"The GPU is busy only {util:.0f}% of the time",
        evidence=(
            f"mean GPU utilization {util:.0f}% over the steady run; no input, stall or "
            "logging problem explains it",
            f"{s.steps_per_s:.1f} it/s, step p50 {ms(s.p50_s)}",
        ),
        fix=(
            "a bigger batch per step (samples/s, not it/s, is what to compare)",
            "reduce per-step launch overhead: torch.compile(model, mode='reduce-overhead') "
            "or CUDA graphs",
        ),
        impact=1.0 - util / 100.0,
    )
