"""Stalls found from stack samples alone: long gaps between the training steps' backward and
optimizer stacks, each with its cause read from its stacks."""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from trainprof.analysis import attribution
from trainprof.analysis.stalls import (
    LOGGING_SHARE,
    OWN_SHARE,
    STALL_FACTOR,
    STALL_MIN_EXCESS_S,
    Stall,
    code_share,
    frozen,
    own_code,
)
from trainprof.analysis.usercode import is_torch_path
from trainprof.store.stacks import Frame, StackSpan

PROGRESS = ("backward", "optimizer")  # a step advances: stacks inside these
EVAL_STEPS = 5  # an evaluation: forward passes alone for this many typical steps...
# ...and at least this long: told apart from the training step's own forward by where it is
# called from, a validation of 0.14 s every 20 steps (the zoo's eval_no_grad, 27 % of the
# run) is one; the 0.2 s this was before missed them all
EVAL_MIN_S = 0.05
LOOP_SHARE = 0.2  # a loop function holds this share of the progress time its top one holds


# A gap of this many typical ones is a stall too where code of its own fills it (a periodic
# function's burst cut short by a torn sample); ordinary gaps need STALL_FACTOR.
OWN_CODE_FACTOR = 2.0
MAX_STALL_CODES = 3  # CPU stalls of up to this many different codes of their own are told apart
# attach reads saves and evaluations from stacks alone, so they fill the ledger's buckets too.


def category_key(source: dict[tuple[str, int], str]) -> Any:
    category = attribution.categoriser(source)
    return lambda s: category(s.frames)


def _gaps(
    spans: Sequence[StackSpan], source: dict[tuple[str, int], str]
) -> list[tuple[float, float]]:
    """Intervals between consecutive stacks in backward or the optimizer, and from the first
    sample to the first of them and from the last of them to the last sample (a stall that
    runs when sampling starts or ends is a stall too)."""
    category = attribution.categoriser(source)
    marks = [s for s in spans if category(s.frames) in PROGRESS]
    if not marks:
        return []
    inner = [(a.t1, b.t0) for a, b in zip(marks, marks[1:], strict=False) if b.t0 > a.t1]
    edges = [(spans[0].t0, marks[0].t0), (marks[-1].t1, spans[-1].t1)]
    return sorted(inner + [(a, b) for a, b in edges if b > a])


def loop_functions(
    spans: Sequence[StackSpan], source: dict[tuple[str, int], str]
) -> frozenset[tuple[str, str]]:
    """attribution.loop_functions, kept to the user functions above a real share of the
    backward/optimizer time: a non-blocking sample torn mid-change can put a backward frame
    under any function once, and that function is not the training loop."""
    category = attribution.categoriser(source)
    weight: dict[tuple[str, str], float] = {}
    for s in spans:
        if category(s.frames) in PROGRESS:
            for f in {(f[0], f[1]) for f in s.frames if attribution.is_user_file(f[1])}:
                weight[f] = weight.get(f, 0.0) + (s.t1 - s.t0)
    top = max(weight.values(), default=0.0)
    return frozenset(f for f, w in weight.items() if w >= LOOP_SHARE * top)


def call_chain(frames: tuple[Frame, ...]) -> tuple[Frame, ...]:
    """The frames that called into torch: where a forward pass was called from (the user's
    loop, a framework's training or evaluation loop), each with its line."""
    for i, frame in enumerate(frames):  # outermost first
        if is_torch_path(frame[1]):
            return frames[:i]
    return frames


def step_forward_chains(
    spans: Sequence[StackSpan],
    source: dict[tuple[str, int], str],
    long_gaps: Sequence[tuple[float, float]],
) -> frozenset[tuple[Frame, ...]]:
    """Where the training step calls its forward pass: the call chains of forward stacks in
    ordinary steps, between two backward/optimizer stacks and outside the long gaps (before
    the first of them or after the last, an evaluation may be running)."""
    category = attribution.categoriser(source)
    marks = [s.t0 for s in spans if category(s.frames) in PROGRESS]
    if not marks:
        return frozenset()
    starts = [a for a, _b in long_gaps]
    chains: set[tuple[Frame, ...]] = set()
    for s in spans:
        if not marks[0] < s.t0 < marks[-1]:
            continue
        i = bisect.bisect_right(starts, s.t0) - 1
        if i >= 0 and s.t0 < long_gaps[i][1]:
            continue
        if category(s.frames) == "forward":
            chains.add(call_chain(s.frames))
    return frozenset(chains)


def _other_forward_s(
    spans: Sequence[StackSpan],
    source: dict[tuple[str, int], str],
    gap: tuple[float, float],
    step_chains: frozenset[tuple[Frame, ...]],
) -> float:
    """Seconds of forward stacks in ``gap`` called from elsewhere than the training step."""
    category = attribution.categoriser(source)
    return sum(
        sec
        for s, sec in attribution.overlaps(spans, [gap])
        if category(s.frames) == "forward" and call_chain(s.frames) not in step_chains
    )


def _cause(
    prof: attribution.Profile,
    length: float,
    typical: float,
    held: bool,
    elsewhere_s: float,
) -> str | None:
    """A gap's cause from its stacks; None when it is no stall (a step whose backward the
    sampling missed looks like a short run of forward passes). ``held``: one unchanged stack
    held most of the gap (``stalls.frozen``); ``elsewhere_s``: its forward time called from
    elsewhere than the training step's forward."""
    if prof.share("save") >= 0.5:
        return "checkpoint"
    if prof.share("compile") >= 0.5:
        return "compile"
    # (a gap that runs code of its own longer than the forward passes in it is that code's)
    if prof.share("forward") >= max(0.4, prof.share("other")):
        # forward passes with no backward over many steps: an evaluation, unless the thread
        # never moved (one forward stack held, descheduled on a busy machine: a loaded CI run
        # called a healthy job's 0.3 s of that an evaluation)
        if held:
            return None
        # ...and the forward passes themselves last that long: a restart's start-up (a new
        # dataset, workers starting) before its first forward is not an evaluation (a CI run
        # called 0.23 s of dataset __init__, worker start and 0.16 s of forward one)
        # ...called from elsewhere than the training step: a healthy job's first forward of an
        # epoch, slowed several times while both cores ran the workers refilling their queues,
        # lasted 0.16 s (a CI run called 0.24 s of one an evaluation); an evaluation loop, or
        # a framework's, calls the model from its own line
        least = max(EVAL_STEPS * typical, EVAL_MIN_S)
        return "eval" if length >= least and elsewhere_s >= least else None
    if prof.share("data") >= 0.5:
        return "data"
    if prof.share("logging") >= LOGGING_SHARE:
        return "logging"
    if prof.share("idle") >= 0.5:
        return "blocked"
    return "cpu"


def find_stalls(spans: Sequence[StackSpan], source: dict[tuple[str, int], str]) -> list[Stall]:
    gaps = _gaps(spans, source)
    if len(gaps) < 5:
        return []
    typical = statistics.median(b - a for a, b in gaps)
    limit = max(STALL_FACTOR * typical, typical + STALL_MIN_EXCESS_S)
    own_limit = max(OWN_CODE_FACTOR * typical, typical + STALL_MIN_EXCESS_S)
    long_gaps = [(a, b) for a, b in gaps if b - a >= limit]
    step_chains = step_forward_chains(spans, source, long_gaps)
    out: list[Stall] = []
    for a, b in gaps:
        if b - a < own_limit:
            continue
        prof = attribution.window_profile(spans, source, [(a, b)])
        elsewhere = _other_forward_s(spans, source, (a, b), step_chains)
        cause = _cause(prof, b - a, typical, frozen(spans, a, b), elsewhere)
        # a shorter gap is a stall only as CPU work of code of its own (own_code_only): a
        # periodic function of 0.3 s beside 0.1 s steps is cut by a torn sample now and then
        # into gaps under 3 steps, and was read as every step's overhead in one attach of two
        if cause is not None and (b - a >= limit or cause == "cpu"):
            out.append(Stall(len(out), a, b, (b - a) - typical, cause))
    return own_code_only(spans, out)


def own_code_only(spans: Sequence[StackSpan], stalls: list[Stall]) -> list[Stall]:
    """The CPU stalls that run code of their own (``stalls.own_code``: a search, a heavy line),
    each held by that code for at least half its time; the others are no stalls. A loop faster
    than the sampling has its backward samples at random phases of its steps, so gaps between
    them of several steps' ordinary work come by chance (a logging loop of 3 ms steps sampled
    at 197 Hz gave gaps of 3-210 ms: a tenth of them were called CPU stalls, a quarter of the
    time); a stall's own code is what sets a real one apart."""
    rest = [st for st in stalls if st.cause == "cpu"]
    if not rest:
        return stalls
    window = (spans[0].t0, spans[-1].t1)
    kept: list[Stall] = []
    for _ in range(MAX_STALL_CODES):
        code = own_code(spans, [(st.t0, st.t1) for st in rest], window)
        if code is None:
            break
        mine = [st for st in rest if code_share(spans, [(st.t0, st.t1)], code) >= OWN_SHARE]
        if not mine:
            break
        kept += mine
        rest = [st for st in rest if st not in mine]
    return [st for st in stalls if st.cause != "cpu" or st in kept]


def number_steps(stalls: list[Stall], t0: float, period_s: float | None) -> list[Stall]:
    """Give each stall the step it fell in, counted with the estimated step period from the
    window's start; without a period the stalls are only numbered in order (so no period in
    steps is ever derived from a guess)."""
    if period_s is None:
        return [replace(st, index=i) for i, st in enumerate(stalls)]
    out, index, last = [], 0, t0
    for st in stalls:
        index += round((st.t0 - last) / period_s)
        out.append(replace(st, index=index))
        index += 1
        last = st.t1
    return out
