"""Slow steps, and what the main process was doing during them. Pure.

A step is a stall when it takes more than ``STALL_FACTOR`` × the median step and at least
``STALL_MIN_EXCESS_S`` more. Its cause is the first that fits: a ``torch.save`` overlapping it
(checkpoint), an evaluation segment overlapping it (eval: a top-level ``eval()`` … ``train()``
with no optimizer step in between), waiting for data for most of it (data), else work in the
main process, which the stack samples of the stall refine (``refine``): torch.compile compiling
(compile), forward passes with no backward, or another DataLoader's epoch (eval, with no mode
switch: validation under ``no_grad`` alone), the thread blocked waiting (blocked: I/O, sleep, a
lock, a socket), formatting, printing or logging (logging), else CPU work (cpu). CPU stalls in the loop's own code while its thread waited
for a CPU are that wait (``waits_for_a_cpu``: wait). Stalls among the warm-up steps are
ignored.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from trainprof.analysis.attribution import (
    dominant_user_frame,
    is_user_file,
    overlaps,
    user_frame,
    window_profile,
)
from trainprof.analysis.call_sites import call_site
from trainprof.analysis.stats import int_percentiles
from trainprof.store.events import ProcessLog
from trainprof.store.stacks import Frame, StackSpan

STALL_FACTOR = 3.0
STALL_MIN_EXCESS_S = 0.02
# Stalls of code of their own: one user function holds the main thread for most of the stall
# time and rarely otherwise.
OWN_SHARE = 0.5
ELSEWHERE_MAX = 0.2
FREE_SHARE = 0.2  # time outside the stalls, as a share of theirs, to judge "rarely otherwise"
# CPU stalls in the loop's own code are the thread's wait for a CPU when that wait, over the
# steady window, is at least this share of their time.
WAIT_COVERS = 0.5


@dataclass(frozen=True)
class Stall:
    index: int  # step number (0-based)
    t0: float  # monotonic
    t1: float
    excess_s: float  # time beyond a median step
    # "checkpoint" | "eval" | "data" | "compile" | "sync" | "logging" | "blocked" | "cpu" | "wait"
    cause: str


@dataclass(frozen=True)
class Segment:
    t0: float
    t1: float
    how: str = "mode"  # eval: "mode" (eval() … train()), "forward" (no backward), "loader"

    @property
    def duration(self) -> float:
        return self.t1 - self.t0


def eval_segments(log: ProcessLog) -> list[Segment]:
    """Spans from a top-level eval() to the next train() with no optimizer step inside."""
    t0 = log.t0
    steps = log.steps["t"]
    out: list[Segment] = []
    start: int | None = None
    for t, training in log.modes:
        if not training and start is None:
            start = t
        elif training and start is not None:
            if not _any_between(steps, start, t):
                out.append(Segment(t0 + start / 1e6, t0 + t / 1e6))
            start = None
    return out


def _any_between(sorted_ts: object, lo: int, hi: int) -> bool:
    import bisect

    i = bisect.bisect_right(sorted_ts, lo)  # type: ignore[call-overload]
    return i < len(sorted_ts) and sorted_ts[i] < hi  # type: ignore[arg-type, index]


def save_segments(log: ProcessLog) -> list[Segment]:
    return [Segment(log.t0 + (t - d) / 1e6, log.t0 + t / 1e6) for t, d, _b, _p in log.saves]


def find_stalls(
    log: ProcessLog,
    cols: Mapping[str, Sequence[int]],
    warmup: int,
    evals: list[Segment],
    saves: list[Segment],
) -> list[Stall]:
    """Steps far slower than the median, with their cause. ``cols``: the step columns the job
    is counted in (``log.steps``, else its batches or backward passes as steps)."""
    ts, durs, waits = cols["t"], cols["dur"], cols["wait"]
    if len(ts) - warmup < 5:
        return []
    med = int_percentiles(durs, (50,), start=warmup, scale=1e6)[0]
    out = []
    for i in range(warmup, len(ts)):
        d = durs[i] / 1e6
        if d < STALL_FACTOR * med or d - med < STALL_MIN_EXCESS_S:
            continue
        t1 = log.t0 + ts[i] / 1e6
        t0 = t1 - d
        excess = d - med
        # A save or an eval explains the stall only if it covers most of the extra time (a
        # 15 ms eval() switch before a 400 ms pure-Python decode does not).
        if sum(_overlap(s, t0, t1) for s in saves) >= 0.5 * excess:
            cause = "checkpoint"
        elif sum(_overlap(s, t0, t1) for s in evals) >= 0.5 * excess:
            cause = "eval"
        elif waits[i] / 1e6 > 0.5 * d:
            cause = "data"
        else:
            cause = "cpu"
        out.append(Stall(i, t0, t1, d - med, cause))
    return out


def _overlap(seg: Segment, t0: float, t1: float) -> float:
    return max(0.0, min(seg.t1, t1) - max(seg.t0, t0))


def period(indices: list[int]) -> int | None:
    """The step period of recurring events, if most gaps agree (±1 step); None if irregular.
    Consecutive slow steps are one event: a 0.2 s stall every 10 steps is often followed by two
    or three slower steps (caches gone cold), which read as "every 1 step" counted apart."""
    indices = [i for k, i in enumerate(indices) if k == 0 or indices[k - 1] != i - 1]
    if len(indices) < 3:
        return None
    gaps = [b - a for a, b in zip(indices, indices[1:], strict=False)]
    common, _n = Counter(gaps).most_common(1)[0]
    close = sum(1 for g in gaps if abs(g - common) <= 1)
    return common if close >= 0.7 * len(gaps) else None


# A stall's stack samples must cover this share of it to be classified by them.
MIN_COVERAGE = 0.3
# compile / blocked: this share of the stall's sampled time.
COMPILE_SHARE = 0.5
BLOCKED_SHARE = 0.5
# sync (CUDA jobs): this share of the stall in a device→host sync (.item(), .cpu()): the host
# waited for the GPU to drain what it had queued (an H200 fp32 run's print of loss.item() every
# 80 steps waited 290 ms each, and was called "CPU work").
SYNC_SHARE = 0.5
# logging: this share of the stall formatting, printing or logging (a whole tensor formatted
# into a log line every N steps): its call context is logging, whatever the CPU it takes.
LOGGING_SHARE = 0.5
# eval without a mode switch: forward passes hold this share, backward + optimizer almost none.
FORWARD_SHARE = 0.4
BACKWARD_MAX = 0.1  # of the forward time
OWN_CODE_FACTOR = 2.0  # an evaluation's forward against the stall's other Python code


def refine(
    stalls: list[Stall],
    spans: Sequence[StackSpan],
    source: dict[tuple[str, int], str],
    other_loader_starts: Sequence[float],
    cuda: bool = False,
) -> tuple[list[Stall], list[Segment]]:
    """Split "cpu" stalls by what the main thread did during them; return the stalls and the
    evaluations found among them (as segments: the stall's excess, ending with the step).
    ``cuda``: the job trains on a GPU, so ``.item()`` lines are syncs that wait for it."""
    out, evals = [], []
    for st in stalls:
        if st.cause != "cpu":
            out.append(st)
            continue
        cause = _cause(st, spans, source, other_loader_starts, cuda)
        if cause == "eval-forward" or cause == "eval-loader":
            evals.append(Segment(st.t1 - st.excess_s, st.t1, cause.split("-")[1]))
            cause = "eval"
        out.append(replace(st, cause=cause))
    return out, evals


def _cause(
    st: Stall,
    spans: Sequence[StackSpan],
    source: dict[tuple[str, int], str],
    other_loader_starts: Sequence[float],
    cuda: bool = False,
) -> str:
    import bisect

    i = bisect.bisect_left(other_loader_starts, st.t0)
    if i < len(other_loader_starts) and other_loader_starts[i] < st.t1:
        return "eval-loader"
    prof = window_profile(spans, source, [(st.t0, st.t1)], cuda)
    total = prof.total
    if total < MIN_COVERAGE * (st.t1 - st.t0):
        return "cpu"
    if prof.share("compile") >= COMPILE_SHARE:
        return "compile"
    if prof.share("sync") >= SYNC_SHARE:
        return "sync"
    fwd = prof.share("forward")
    if (
        not frozen(spans, st.t0, st.t1)  # a thread that never moved evaluates nothing
        and fwd >= FORWARD_SHARE
        and prof.share("backward") + prof.share("optimizer") < BACKWARD_MAX * fwd
        # An evaluation runs the model; a pseudo-label refresh runs it once and then spends
        # longer in its own Python (a search, a decode): that is CPU work, not evaluation. One
        # stall holds a dozen stack samples or so, and a loaded machine's showed a refresh at
        # 52 % forward, 48 % search: an evaluation's forward is at least twice the rest.
        and fwd >= OWN_CODE_FACTOR * prof.share("other")
    ):
        return "eval-forward"
    if prof.share("logging") >= LOGGING_SHARE:
        return "logging"
    if prof.share("idle") >= BLOCKED_SHARE:
        return "blocked"
    return "cpu"


def frozen(spans: Sequence[StackSpan], a: float, b: float) -> bool:
    """One unchanged stack (a span: py-spy saw no change) covers half of [a, b] or more: the
    thread did not progress (descheduled on a loaded machine, say: a loaded CI run's attach
    called a healthy job's 0.3 s of one held forward stack an evaluation). An evaluation runs
    many forward passes, and its stacks change."""
    i = max(0, bisect.bisect_left(spans, a, key=lambda s: s.t0) - 1)
    longest = 0.0
    for s in spans[i:]:
        if s.t0 >= b:
            break
        longest = max(longest, min(s.t1, b) - max(s.t0, a))
    return longest >= 0.5 * (b - a)


# The code a stall runs: a user function, or one line of it (the line None: the whole function).
Code = tuple[str, str, int | None]


def own_code(
    spans: Sequence[StackSpan], stalls: list[tuple[float, float]], window: tuple[float, float]
) -> Code | None:
    """The code the stalls run of their own, if any: of the user frames on the stack that holds
    the main thread longest in them, the innermost function, else line, that holds most of
    their time and rarely runs outside them (a search, an upload, a heavy line inline in the
    loop), not the loop's own code, which runs in every step as well. A search's hot frame may
    be a generator expression inside it (46 % of the stalls, the rest in the search's own
    ``sum`` line): the search is the code."""
    chain = _dominant_chain(spans, stalls)
    w0, w1 = window
    gaps, last = [], w0
    for a, b in sorted(stalls):
        if a > last:
            gaps.append((last, a))
        last = max(last, b)
    if w1 > last:
        gaps.append((last, w1))
    functions: list[Code] = list(dict.fromkeys((f[0], f[1], None) for f in chain))
    # stalls that fill nearly all the window (a task every 15 steps of a fraction of a ms) leave
    # gaps of a few ms, which the stall's own stacks overlap at their edges: no judge of "rarely"
    judged = sum(b - a for a, b in gaps) >= FREE_SHARE * sum(b - a for a, b in stalls)
    for code in functions + list(chain):
        inside = code_share(spans, stalls, code)
        if inside >= OWN_SHARE and (not judged or code_share(spans, gaps, code) <= ELSEWHERE_MAX):
            return code
    return None


def _dominant_chain(
    spans: Sequence[StackSpan], windows: list[tuple[float, float]]
) -> tuple[Frame, ...]:
    """The user frames, innermost first, of the stack whose innermost user frame held the main
    thread longest in the windows (the longest-held such stack)."""
    frame = dominant_user_frame(spans, windows)
    if frame is None:
        return ()
    held: Counter[tuple[Frame, ...]] = Counter()
    for s, seconds in overlaps(spans, windows):
        if user_frame(s.frames) == frame:
            held[tuple(f for f in reversed(s.frames) if is_user_file(f[1]))] += int(seconds * 1e6)
    return held.most_common(1)[0][0]


def distinct_code(
    spans: Sequence[StackSpan], stalls: list[tuple[float, float]], window: tuple[float, float]
) -> bool:
    """The stalls run code of their own (``own_code``), not the loop's."""
    return own_code(spans, stalls, window) is not None


def code_share(spans: Sequence[StackSpan], windows: list[tuple[float, float]], code: Code) -> float:
    """Share of main-thread time in the windows whose stack passes through ``code``."""
    name, path, line = code
    inside = total = 0.0
    for s, seconds in overlaps(spans, windows):
        total += seconds
        if any(f[0] == name and f[1] == path and line in (None, f[2]) for f in s.frames):
            inside += seconds
    return inside / total if total > 0 else 0.0


def waits_for_a_cpu(
    stalls: list[Stall],
    spans: Sequence[StackSpan],
    window: tuple[float, float] | None,
    runq: float | None,
) -> list[Stall]:
    """CPU stalls in the loop's own code, only slower, while the main thread waited, runnable,
    for a CPU (``runq``: its share of the steady window) at least ``WAIT_COVERS`` of their
    time, are that wait ("wait"): a cgroup quota pauses the whole job every period once it is
    spent, and those pauses come as regularly as a periodic task's (a CI run named them CPU
    work "in the training loop itself", every 5 steps)."""
    cpu = [st for st in stalls if st.cause == "cpu"]
    if not cpu or window is None or runq is None or not spans:
        return stalls  # without stacks nothing says whose code the stalls ran
    excess = sum(st.excess_s for st in cpu)
    if runq * (window[1] - window[0]) < WAIT_COVERS * excess:
        return stalls
    if distinct_code(spans, [(st.t0, st.t1) for st in cpu], window):
        return stalls
    return [replace(st, cause="wait") if st.cause == "cpu" else st for st in stalls]


def saving_calls(
    stalls: list[Stall],
    saves: Sequence[Segment],
    spans: Sequence[StackSpan],
    loop_funcs: frozenset[tuple[str, str]],
) -> list[Stall]:
    """Stalls of CPU work or blocked waiting inside the call that saves a checkpoint are the
    checkpoint's: a ``save_checkpoint()`` that writes with torch.save, then fsyncs and copies
    the file, costs all of that (the loop calls one function for all of it; the stacks say
    which). Where the stacks confirm that of most such stalls, the others that hold a save are
    the same routine, which sparse samples missed (a 28 ms save between two samples of the
    optimizer step). Without stack samples a stall is only what the save itself covered."""
    if not saves or not spans:
        return stalls
    out: list[Stall] = []
    confirmed, unconfirmed = 0, []
    for st in stalls:
        inside = [s for s in saves if s.t1 > st.t0 and s.t0 < st.t1]
        if st.cause in ("cpu", "blocked") and inside:
            stall_call = call_site(spans, [(st.t0, st.t1)], loop_funcs)
            save_call = call_site(spans, [(s.t0, s.t1) for s in inside], loop_funcs)
            if stall_call is not None and save_call is not None:
                same = (stall_call.call, stall_call.callee) == (save_call.call, save_call.callee)
                if same and stall_call.callee is not None:
                    st = replace(st, cause="checkpoint")
            if st.cause != "checkpoint":
                unconfirmed.append(len(out))
        if inside and st.cause == "checkpoint":
            confirmed += 1
        out.append(st)
    if confirmed > len(unconfirmed):
        for i in unconfirmed:
            out[i] = replace(out[i], cause="checkpoint")
    return out


def outside_stops(stalls: list[Stall], stops: Sequence[tuple[float, float]]) -> list[Stall]:
    """The stalls that are not a stop of the whole job by a signal (SIGSTOP, Ctrl-Z): a step
    whose extra time the job spent stopped is no stall of its code."""
    if not stops:
        return stalls
    return [
        st
        for st in stalls
        if sum(max(0.0, min(b, st.t1) - max(a, st.t0)) for a, b in stops) < 0.5 * st.excess_s
    ]
