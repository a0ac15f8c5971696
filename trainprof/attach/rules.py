"""Attach variants of the rules that stack samples alone can judge: the same ids, thresholds
and `where` as their `trainprof run` counterparts, with evidence that states what the stacks
measured (shares of the sampled main-thread time, stall lengths, an estimated step period)
and nothing a probe would have had to count. Registered into the rule registry on import."""

from __future__ import annotations

import ast
import functools
from collections import Counter
from collections.abc import Callable
from dataclasses import replace

from trainprof.analysis import attribution
from trainprof.analysis.attach_view import AttachView
from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules import (
    anomaly_detection,
    blocking_stall,
    checkpoint_stall,
    cpu_stall,
    cpu_starved,
    eval_stall,
    input_bound,
    logging_overhead,
    loop_overhead,
    memory_growth,
    sampler_overhead,
    worker_startup,
)
from trainprof.analysis.rules._common import host_time_is_free, loader_caller, ms
from trainprof.analysis.rules._stalls import Stalls, judge
from trainprof.analysis.rules.registry import ATTACH_VARIANTS, Check
from trainprof.attach import DEFAULT_DURATION_S
from trainprof.units import plural

STACKS = ("stacks",)
# host samples over at least this long tell a leak from a phase
LONG_ENOUGH_S = memory_growth.SHORT_S.value


def variant(rule_id: str, needs: tuple[str, ...] = STACKS) -> Callable[[Check], Check]:
    def register(check: Check) -> Check:
        ATTACH_VARIANTS[rule_id] = (needs, check)
        return check

    return register


def _attach(m: Metrics) -> AttachView:
    assert m.attach is not None and m.ledger is not None
    return m.attach


def _sampled(m: Metrics) -> str:
    a = _attach(m)
    return f"{a.sampled_s:.1f} s of main-thread stack samples at {a.rate_hz} Hz"


@variant("input-bound")
def input_bound_attach(m: Metrics) -> Finding | None:
    a, led = _attach(m), m.ledger
    assert led is not None
    # beyond the sampler, as under `run`: sampler-overhead judges the sampler's own time
    share = led.share(*input_bound.DATA)
    if share < input_bound.WAIT_FRAC.value or host_time_is_free(m):
        return None
    parts = [
        (led.share("fetch"), "dataset __getitem__"),
        (led.share("collate"), "collate_fn"),
        (led.share("pin"), "pin_memory"),
        (led.share("transfer"), "receiving batches from workers"),
        (led.share("data_wait"), "waiting on workers or the loader's own code"),
    ]
    split = ", ".join(f"{name} {s:.0%}" for s, name in parts if s >= 0.01)
    restarts = _restarts_cost(m)
    evidence = [
        f"the main thread was inside the DataLoader {share:.0%} of the time ({_sampled(m)})",
        f"of it: {split}" if split else "",
        _workers_seen(m, a, restarts),
    ]
    part = "collate" if led.share("collate") > led.share("fetch") else "getitem"
    # More workers cannot share the main thread's receiving; unless the workers are at
    # capacity, and the main thread receives while they make the next batches.
    busy = _workers_busy(a)
    saturated = busy is not None and busy * input_bound.SATURATED >= 1.0
    receiving = led.get("transfer") >= 0.5 * led.get(*input_bound.DATA)
    waiting = m.worker_load if saturated and input_bound.workers_wait(m) else None
    if busy is not None and (receiving or saturated):  # the hand-over's or the workers'
        limit = ": they are the limit" if saturated else ""
        if saturated and receiving:
            limit += ", and the main thread's wait inside receiving is a wait for them"
        if waiting is not None:
            limit += "; " + input_bound.waiting_clause(waiting, "__getitem__")
        evidence.append(
            f"the workers' main threads were making batches {busy:.0%} of the time{limit}"
        )
    transfer = receiving and not saturated
    if waiting is not None:
        fix = input_bound.waiting_fix(m, a.workers_at_once or a.workers, None)
    elif transfer:
        by_fd = any(f[0] == "rebuild_storage_fd" for s in m.activity.spans for f in s.frames)
        fix = input_bound.transfer_fix(
            {"sharing_strategy": "file_descriptor"} if by_fd else {}, None, 0.0
        )
    else:
        at_once = a.workers_at_once if a.workers_at_once is not None else a.workers
        fix = [input_bound.workers_fix(m, at_once), *input_bound.part_fix(part, None)]
    if restarts >= worker_startup.SHARE.value:
        fix = [worker_startup.PERSISTENT_FIX, *fix]
    return Finding(
        id="input-bound",
        severity="warning",
        title=f"Input-bound: the training loop waits for data {share:.0%} of the time",
        evidence=tuple(e for e in evidence if e),
        fix=tuple(fix),
        where=loader_caller(m) if transfer else loader_code(m, part) or loader_caller(m),
    )


def _workers_busy(a: AttachView) -> float | None:
    """The share of the DataLoader workers' main-thread time spent making batches (inside the
    fetcher: the dataset and the collate), not waiting for the next index; None where their
    stacks cover less than a second."""
    total = sum(s.t1 - s.t0 for s in a.worker_spans)
    if total < 1.0:
        return None
    busy = sum(
        s.t1 - s.t0
        for s in a.worker_spans
        if any(f[1].replace("\\", "/").endswith("utils/data/_utils/fetch.py") for f in s.frames)
    )
    return busy / total


def _restarts_cost(m: Metrics) -> float:
    """The main thread's share of the sampled time spent starting DataLoader workers again
    (in the multi-process iterator's ``__init__``: forking them, sending each the dataset);
    0 where they were not restarted."""
    a = _attach(m)
    if not a.workers_restarted or not a.sampled_s:
        return 0.0
    starting = sum(
        s.t1 - s.t0
        for s in m.activity.spans
        if any(f[0] == "_MultiProcessingDataLoaderIter.__init__" for f in s.frames)
    )
    return starting / a.sampled_s


def _workers_seen(m: Metrics, a: AttachView, restarts: float) -> str:
    """How many workers were seen; where restarting them cost the main thread (``restarts``,
    its share), how many at once and what that cost."""
    cpus = f" on {m.usable_cpus} usable CPUs" if m.usable_cpus else ""
    seen = f"{plural(a.workers, 'DataLoader worker process')} seen under the job"
    if restarts < 0.01:  # none, or a restart too rare to count (a new loader)
        return seen + cpus
    return (
        f"{seen} in {a.sampled_s:.1f} s, at most {a.workers_at_once} at once{cpus}: workers "
        "are started again and again (a new DataLoader iterator each epoch starts its workers "
        f"unless persistent_workers=True); starting them held the main thread {restarts:.0%} "
        "of the time, and their first batches are waited for"
    )


def loader_code(m: Metrics, part: str) -> str | None:
    """``file:line (Class.__getitem__)`` of the dataset's __getitem__ (or the collate_fn) as
    `trainprof run` names it: the line of its ``def``, found from the stacks' hot line."""
    a = _attach(m)
    spans = list(m.activity.spans) + list(a.worker_spans)
    counter: Counter[tuple[str, str, int]] = Counter()
    for s in spans:
        for f in reversed(s.frames):
            name = attribution.short_name(f[0])
            hit = (
                name in ("__getitem__", "__getitems__") if part == "getitem" else "collate" in name
            )
            if hit and attribution.is_user_file(f[1]):
                counter[f] += int((s.t1 - s.t0) * 1e6)
                break
    if not counter:
        return None
    qualname, path, line = counter.most_common(1)[0][0]
    return f"{path}:{def_line(path, line, attribution.short_name(qualname))} ({qualname})"


@functools.lru_cache(maxsize=64)
def _tree(path: str) -> ast.Module | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return None


def def_line(path: str, line: int, name: str) -> int:
    """The first line of the function ``name`` that holds ``line`` (its code object's
    co_firstlineno: the first decorator's line, else the ``def``); ``line`` if not found."""
    tree = _tree(path)
    best: int | None = None
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            end = node.end_lineno or node.lineno
            if node.lineno <= line <= end:
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                best = first if best is None else max(best, first)
    return best if best is not None else line


def _stall_evidence(m: Metrics, found: Stalls, doing: str) -> list[str]:
    a = _attach(m)
    n = len(found.stalls)
    length = sum(st.t1 - st.t0 for st in found.stalls) / n
    every = ""
    if found.period:
        every = f", every ~{found.period} steps by the estimated step period"
        if a.stall_period_s:
            every += f" (every {a.stall_period_s:.2f} s)"
    elif a.stall_period_s:
        every = f", every {a.stall_period_s:.2f} s (the median time between their starts)"
    lines = [
        f"{plural(n, 'stall')} of {ms(length)} on average between training steps{every}",
        f"the stalls cost {found.cost_s:.2f} s, {found.share:.0%} of the sampled time; the main "
        f"thread was {doing}",
    ]
    cs = found.site
    if cs is not None:
        lines.append(cs.sentence + (f"; the hot line is {cs.hot_where}" if cs.hot else ""))
    return lines


def _every(m: Metrics, found: Stalls) -> str:
    if found.period:
        return f"every ~{found.period} steps"
    a = _attach(m)
    return f"every {a.stall_period_s:.2f} s" if a.stall_period_s else "repeatedly"


@variant("cpu-stall")
def cpu_stall_attach(m: Metrics) -> Finding | None:
    found = judge(m, "cpu", "stall_compute")
    if found is None:
        return None
    doing = "computing (not loading data, saving, evaluating or blocked)"
    return cpu_stall.finding(found, _every(m, found), _stall_evidence(m, found, doing))


@variant("blocking-stall")
def blocking_stall_attach(m: Metrics) -> Finding | None:
    found = judge(m, "blocked", "stall_blocked")
    if found is None:
        return None
    doing = "blocked waiting (sleep, socket, lock or I/O)"
    return blocking_stall.finding(found, _every(m, found), _stall_evidence(m, found, doing))


@variant("checkpoint-stall")
def checkpoint_stall_attach(m: Metrics) -> Finding | None:
    led = m.ledger
    assert led is not None
    saves = [seg for seg, _b, _p in m.activity.saves]
    share = led.share("save")
    if not saves or share < checkpoint_stall.SHARE.value:
        return None
    cost = led.get("save")
    frame = attribution.dominant_user_frame(m.activity.spans, [(s.t0, s.t1) for s in saves])
    gaps = [b.t0 - a.t0 for a, b in zip(saves, saves[1:], strict=False)]
    every = f", every {sum(gaps) / len(gaps):.1f} s" if gaps else ""
    return Finding(
        id="checkpoint-stall",
        severity="warning",
        title=f"Checkpoint saves block training: {share:.0%} of the time saving",
        evidence=(
            f"checkpoint saves (torch.save, safetensors) held the main thread {cost:.2f} s, {share:.0%} of {_sampled(m)}",
            f"{plural(len(saves), 'save')} seen, {ms(cost / len(saves))} each{every}; "
            "training waits for each save",
        ),
        fix=(
            "save less often (every N minutes, or only at the end of an epoch)",
            "skip optimizer state when you will not resume; keep only the last N checkpoints",
            "save asynchronously: torch.distributed.checkpoint.async_save, or copy the "
            "state_dict to CPU and write it from a background thread",
        ),
        where=attribution.where(frame),
    )


@variant("anomaly-detection")
def anomaly_detection_attach(m: Metrics) -> Finding | None:
    """Only autograd's anomaly detection keeps a stack for each op: stacks that do say it is
    on (where it was turned on, and whether it checks for NaN, are the probe's to read)."""
    led = m.ledger
    assert led is not None
    kept = led.share("anomaly")
    if kept < anomaly_detection.SEEN.value:
        return None
    evidence = [
        f"the main thread kept the Python stack of an op {kept:.0%} of the time "
        f"({anomaly_detection.MEASURED}; {_sampled(m)}): autograd does that only with anomaly "
        "detection on",
        "it likely also checks every gradient of the backward pass for NaN (the default), in "
        "C++, not measured apart",
    ]
    return anomaly_detection.finding(kept, evidence, None)


@variant("logging-overhead")
def logging_overhead_attach(m: Metrics) -> Finding | None:
    """From the stacks alone: the share of the time the main thread printed, logged or
    formatted tensors (how many lines it wrote is not seen: attach does not read the job's
    output, so no lines-per-step floor applies)."""
    led, prof = m.ledger, m.activity.loop_profile or m.activity.profile
    assert led is not None
    share = led.share("logging")
    if prof is None or share < logging_overhead.SHARE.value or host_time_is_free(m):
        return None
    evidence = (
        f"the main thread spent {share:.0%} of the time printing, logging or formatting "
        f"tensors ({_sampled(m)})",
        "how many lines a step writes is not counted: attach does not see the job's output",
    )
    return logging_overhead.finding(
        f"Logging takes {share:.0%} of the training loop", evidence, prof
    )


@variant("sampler-overhead")
def sampler_overhead_attach(m: Metrics) -> Finding | None:
    """From the stacks alone: the share of the time in the sampler's ``__iter__`` (per batch
    needs the batches counted, which the probe does)."""
    led = m.ledger
    assert led is not None
    share = led.share("sampler")
    if share < sampler_overhead.SHARE.value or host_time_is_free(m):
        return None
    evidence = (
        f"the main thread ran the sampler (DataLoader._next_index) {share:.0%} of the time "
        f"({_sampled(m)})",
        sampler_overhead.RUNS_IN_MAIN,
    )
    return sampler_overhead.finding(share, evidence, sampler_overhead.sampler_frame(m))


# loop-overhead's own check reads the ledger, the loop's stacks and their rate: it applies as is.
variant("loop-overhead")(loop_overhead.check)
# eval-stall's own check reads only the ledger, the evaluations and the stacks: it applies as is.
variant("eval-stall")(eval_stall.check)


@variant("memory-growth", ("samples",))
def memory_growth_attach(m: Metrics) -> Finding | None:
    """memory-growth's own check on the host samples, over what attach sampled: unlike
    `run`'s steady window, that may be a phase that allocates (a dataset built, a first epoch's
    caches), so a rise over less than ``LONG_ENOUGH_S`` is said as information, not a leak (a
    job attached 4 s after its start rose 332 → 391 MiB in 3 s and was told it would run out
    of memory in 20 min)."""
    growing = memory_growth.steadily_growing(m.activity.growths)
    if not growing:
        return None
    long_enough = tuple(g for g in growing if g.seconds >= LONG_ENOUGH_S)
    if long_enough:
        return memory_growth.check(replace(m, activity=replace(m.activity, growths=long_enough)))
    return Finding(
        id="memory-growth",
        severity="info",
        title="Host memory rose while sampled, over too short a time to call it a leak",
        evidence=(
            *(memory_growth.growth_line(g) for g in growing[:6]),
            f"a rise over less than {LONG_ENOUGH_S:.0f} s may be a phase that allocates (a dataset "
            "or a cache built, a first epoch): attach cannot tell where the job is in its run",
        ),
        fix=(f"attach for longer (--duration {DEFAULT_DURATION_S:.0f} or more) to tell a leak",),
    )


variant("cpu-starved", ("samples", "schedstat"))(cpu_starved.check)
