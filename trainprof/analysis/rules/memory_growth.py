"""Memory growth: host memory of the job or a worker rises steadily during training.

Seed 003: an unbounded dict cache in the Dataset, filled in ``__getitem__``, grew in each of
the DataLoader workers until the machine ran out of memory. Growth is judged per process (main
and each worker, on USS for workers) over the steady window, on a good linear fit that holds
in both halves of the window (analysis/memory.py). The main process's growth while a torch
profiler records most of the run is left to profiler-left-on, which names its cause.

Anti-pattern::

    class Frames(Dataset):
        cache = {}
        def __getitem__(self, i):
            if i not in self.cache:
                self.cache[i] = decode(self.paths[i])  # every worker keeps its own copy
            return self.cache[i]

Best practice::

    @functools.lru_cache(maxsize=1024)
    def decoded(path): return decode(path)
"""

from __future__ import annotations

from collections.abc import Iterable

from trainprof.analysis.findings import Finding
from trainprof.analysis.holders import Holder, busiest_functions, likeliest
from trainprof.analysis.memory import Growth
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._common import primary_loader
from trainprof.analysis.rules._profiler import recording
from trainprof.analysis.rules.registry import Threshold, rule
from trainprof.limits import ATTACH_DURATION_S

MB = 2**20
MIN_BPS = Threshold("min_rate", 1 * MB, "bytes/s", "growth rate, in any run")
SLOW_BPS = Threshold("slow_rate", 5 * MB / 60, "bytes/s", "growth rate in runs of 5 min or more")
SLOW_MIN_S = Threshold("slow_min_duration", 300, "s", "the run length for the slow rate")
MIN_TOTAL = Threshold("min_total", 50 * MB, "bytes", "total growth at least")
MIN_R2 = Threshold("min_r2", 0.8, "ratio", "goodness of the linear fit (R²)")
# A leak filled step by step rises in a straight line (the zoo's cache: R² 1.00 over 5 s); the
# allocator's swings in a healthy job fit a short window at R² 0.86 (a 3 s window, 408 → 472
# MiB, twice seen), so a short window must show a near-perfect line
SHORT_S = Threshold("short_window", 10, "s", "a steady window shorter than this is short")
SHORT_R2 = Threshold("short_min_r2", 0.95, "ratio", "goodness of the fit over a short window")
# Over a short window the allocator's swings in a healthy job can rise along a line too: 327 →
# 380 MiB (16 %), and healthy_stream's main process 406 → 486 MiB (20 %) at R² 1.00 in a 2 s
# window (once in about a dozen runs). The leaks seen in as short windows rose 31-500 % (an RNN
# whose hidden state keeps every step's graph: 278 → 363 MiB in 4.5 s).
SHORT_RISE = Threshold(
    "short_min_rise",
    0.25,
    "share",
    "over a short window, the rise as a share of the process's memory at its start",
)
EXHAUST_ERROR_S = Threshold(
    "exhaust_error", 3600, "s", "an error when available memory runs out within this time"
)


@rule(
    id="memory-growth",
    examples=("memory_growth", "worker_cow_growth"),
    title="Memory growth",
    family="memory",
    needs=("steps", "samples"),
    or_from=("samples", "sampled_window"),
    thresholds=(
        MIN_BPS,
        SLOW_BPS,
        SLOW_MIN_S,
        MIN_TOTAL,
        MIN_R2,
        SHORT_S,
        SHORT_R2,
        SHORT_RISE,
        EXHAUST_ERROR_S,
    ),
)
def check(m: Metrics) -> Finding | None:
    if m.basis.by_stacks:
        return _over_what_was_sampled(m)
    return _growing(m, m.activity.growths)


def _growing(m: Metrics, growths: Iterable[Growth]) -> Finding | None:
    growing = steadily_growing(growths)
    if recording(m):
        # a recording profiler keeps every op's events in the main process: profiler-left-on
        # names that growth with its cause (it read as a cache to bound, beside it)
        growing = [g for g in growing if g.role != "main"]
    if not growing:
        return None
    rate = sum(g.bytes_per_s for g in growing)
    evidence = [growth_line(g) for g in growing[:6]]
    out_in = running_out(m, rate)
    if out_in is not None:
        evidence.append(out_in[0])
    holder = _holder(m, growing)
    if holder is not None:
        kept = (
            "adds to a container that outlives the call, each time it runs"
            if holder.adds
            else "keeps a sum across calls: a tensor summed so keeps each step's autograd graph"
        )
        evidence.append(
            f"the likeliest holder: `{holder.text}` in {holder.function} {kept} (what each "
            "line keeps is not traced)"
        )
    fix = [
        "bound in-memory caches: functools.lru_cache(maxsize=...) or an LRU dict with a size limit",
        "do not append tensors that still hold the graph (store loss.item(), not loss)",
    ]
    cow = [g for g in growing if g.role == "worker" and g.copy_on_write]
    if cow:
        evidence.insert(len(growing[:6]), _cow_line(cow))
        fix.insert(0, COW_FIX)
    elif any(g.role == "worker" for g in growing):
        fix.insert(
            0,
            "each DataLoader worker keeps its own copy of a cache filled in __getitem__: cache "
            "before training in the main process, in numpy arrays (not Python lists/dicts, whose "
            "refcounts copy pages on fork), or use a shared memory store",
        )
    return Finding(
        id="memory-growth",
        severity="error" if out_in is not None and out_in[1] else "warning",
        title=f"Host memory grows steadily ({rate * 60 / MB:.0f} MiB/min)",
        evidence=tuple(evidence),
        fix=tuple(fix),
        where=holder.where if holder is not None else (_dataset_code(m) if cow else None),
    )


COW_FIX = (
    "keep the dataset's data in numpy arrays or an Arrow table (or tensors), not Python lists "
    "of dicts, strings or ints: a forked worker that reads a Python object writes its "
    "reference count, and the page it lives on is copied into the worker; arrays are read "
    "without a write, and their pages stay shared (pytorch/pytorch#13246)"
)


def _cow_line(cow: list[Growth]) -> str:
    """The copy-on-write evidence: private memory up, resident memory flat."""
    rss = max(g.rss_rise or 0.0 for g in cow)
    return (
        f"{len(cow)} DataLoader worker{'s' if len(cow) > 1 else ''}' private memory (USS) rose "
        f"while resident memory (RSS) rose {rss / MB:.0f} MiB at most: pages shared with the "
        "main process turned private (copy-on-write), nothing new was allocated; Python "
        "objects the workers read (a list of dicts in the Dataset) do this"
    )


def _dataset_code(m: Metrics) -> str | None:
    """The Dataset's ``__getitem__`` the workers run, where it is the user's own code."""
    loader = primary_loader(m)
    return loader.user_code_at("getitem") if loader is not None else None


def _holder(m: Metrics, growing: list[Growth]) -> Holder | None:
    """The line likeliest to hold the growth: in the dataset's ``__getitem__`` where workers
    grow, else in the functions the main thread ran over the window, helpers before the loop."""
    if growing[0].role == "worker":
        loader = primary_loader(m)
        at = loader.config.get("getitem_at") if loader is not None else None
        return likeliest([(str(at[2]), str(at[0]), int(at[1]))]) if at else None
    window = m.activity.window
    if window is None or not m.activity.spans:
        return None
    loop = m.activity.loop_funcs
    return likeliest(busiest_functions(m.activity.spans, window, loop), loop)


def running_out(m: Metrics, rate: float) -> tuple[str, bool] | None:
    """At ``rate`` bytes/s: when the memory still available runs out, said, and whether within
    the error's time (None: available memory not read, or no growth)."""
    avail = m.activity.mem_available_min
    if avail is None or rate <= 0:
        return None
    line = (
        f"at {rate * 60 / MB:.0f} MiB/min the {avail / MB:.0f} MiB still available run out in "
        f"about {avail / rate / 60:.0f} min"
    )
    return line, avail / rate < EXHAUST_ERROR_S.value


def steadily_growing(growths: Iterable[Growth]) -> list[Growth]:
    """The processes whose memory grew steadily, enough and fast enough; the fastest first."""
    growing = []
    for g in growths:
        total = g.end_bytes - g.start_bytes
        fast = g.bytes_per_s >= MIN_BPS.value
        slow = g.bytes_per_s >= SLOW_BPS.value and g.seconds >= SLOW_MIN_S.value
        short = g.seconds < SHORT_S.value
        fit = SHORT_R2.value if short else MIN_R2.value
        steady = g.r2 >= fit and g.sustained
        if short and total < SHORT_RISE.value * g.start_bytes:
            continue
        if steady and total >= MIN_TOTAL.value and (fast or slow):
            growing.append(g)
    return sorted(growing, key=lambda g: -g.bytes_per_s)


def growth_line(g: Growth) -> str:
    return (
        f"{g.role} process {g.pid}: {g.metric.upper()} {g.start_bytes / MB:.0f} → "
        f"{g.end_bytes / MB:.0f} MiB over {g.seconds:.0f} s ({g.bytes_per_s * 60 / MB:.0f} MiB/min, "
        f"steady: R²={g.r2:.2f})"
    )


def _over_what_was_sampled(m: Metrics) -> Finding | None:
    """Over a window sampled from outside, which may be a phase that allocates (a dataset
    built, a first epoch's caches): a rise over less than ``SHORT_S`` is said as information,
    not a leak."""
    growing = steadily_growing(m.activity.growths)
    if not growing:
        return None
    long_enough = tuple(g for g in growing if g.seconds >= SHORT_S.value)
    if long_enough:
        return _growing(m, long_enough)
    return Finding(
        id="memory-growth",
        severity="info",
        title="Host memory rose while sampled, over too short a time to call it a leak",
        evidence=(
            *(growth_line(g) for g in growing[:6]),
            f"a rise over less than {SHORT_S.value:.0f} s may be a phase that allocates (a "
            "dataset or a cache built, a first epoch): attach cannot tell where the job is in "
            "its run",
        ),
        fix=(f"attach for longer (--duration {ATTACH_DURATION_S:.0f} or more) to tell a leak",),
    )
