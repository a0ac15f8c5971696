"""An attach run directory → the Metrics the rules and renderers read. Pure: no I/O beyond
what the Session loaded (and the worker traces it names).

There are no probe steps, so everything comes from the main thread's stack samples:

- the window is what py-spy covered; the step period is estimated from the stacks' rhythm
  (``estimate``), iterations/s from it and the time outside stalls;
- training progress shows as samples in backward or the optimizer; a gap between them longer
  than ``STALL_FACTOR`` step periods (and ``STALL_MIN_EXCESS_S`` more than one) is a stall,
  its cause read from its stacks as `trainprof run` reads a slow step's (checkpoint, eval,
  compile, blocked, data, CPU work); its time beyond one period is the stall's;
- the time ledger splits the window by the stacks: data (sampler, ``__getitem__``, collate,
  pin, waiting on workers), stalls by cause, then forward/backward/optimizer/logging/loop.
"""

from __future__ import annotations

import bisect
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from trainprof.analysis import attribution, frameworks, ledger, periodicity
from trainprof.analysis.cpu_starvation import cpu_starvation
from trainprof.analysis.ledger import BUCKETS, Ledger
from trainprof.analysis.memory import growth
from trainprof.analysis.metrics import Activity, Metrics
from trainprof.analysis.outside_view import (
    HeldStack,
    OutsideView,
    RankAttach,
    RateEstimate,
)
from trainprof.analysis.rules import hang as hang_rule
from trainprof.analysis.stalls import (
    OWN_SHARE,
    STALL_FACTOR,
    STALL_MIN_EXCESS_S,
    Segment,
    Stall,
    code_share,
    frozen,
    own_code,
    period,
)
from trainprof.analysis.stats import finite, mean
from trainprof.analysis.stillness import stillness
from trainprof.analysis.worker_load import worker_load
from trainprof.store.gpus import machine_utils
from trainprof.store.session import Session
from trainprof.store.stacks import Frame, StackSpan, load_spans

PROGRESS = ("backward", "optimizer")  # a step advances: stacks inside these
EVAL_STEPS = 5  # an evaluation: forward passes alone for this many typical steps...
# ...and at least this long: told apart from the training step's own forward by where it is
# called from, a validation of 0.14 s every 20 steps (the zoo's eval_no_grad, 27 % of the
# run) is one; the 0.2 s this was before missed them all
EVAL_MIN_S = 0.05
LOOP_SHARE = 0.2  # a loop function holds this share of the progress time its top one holds
MIN_OF_RUNS = 0.85  # an estimate below this share of the steps the stacks prove is rejected
# No rhythm, and the steps the stacks prove come to this share of the fastest rhythm the
# sampling shows: a loop faster than the sampling is the likely reason (its samples fall at
# random phases of its steps, and its proven stretches saturate near a quarter of the samples)
NEAR_LIMIT = 0.25
MAX_STALL_CODES = 3  # CPU stalls of up to this many different codes of their own are told apart
# attach reads saves and evaluations from stacks alone, so they fill the ledger's buckets too.
_STALL_BUCKET = {**ledger.STALL_BUCKET, "eval": "eval", "checkpoint": "save"}
_CATEGORY_BUCKET = {**ledger.CATEGORY_BUCKET, "save": "save"}


def _key(source: dict[tuple[str, int], str]) -> Any:
    category = attribution.categoriser(source)
    return lambda s: category(s.frames)


def rate_of(
    spans: Sequence[StackSpan],
    source: dict[tuple[str, int], str],
    rate_hz: int,
    window: tuple[float, float],
) -> tuple[periodicity.Rhythm, list[Stall]]:
    """The loop's rhythm, judged outside its stalls (a stall is no step), and the stalls."""
    dt = 1.0 / max(1, rate_hz)
    states = periodicity.state_series(spans, window[0], window[1], dt, _key(source))
    first = find_stalls(spans, source)
    for st in first:
        if st.cause == "data":
            continue  # a slow batch is part of the loop's rhythm, not time away from it
        for k in range(
            max(0, int((st.t0 - window[0]) / dt)),
            min(len(states), int((st.t1 - window[0]) / dt) + 1),
        ):
            states[k] = -1
    loop_s = (window[1] - window[0]) - sum(st.t1 - st.t0 for st in first if st.cause != "data")
    rhythm = periodicity.rhythm(states, dt, loop_s)
    return rhythm, first


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


def progress_runs(
    spans: Sequence[StackSpan],
    source: dict[tuple[str, int], str],
    stalls: Sequence[Stall],
    dt: float,
) -> int:
    """Separate stretches of backward/optimizer stacks outside stalls: each is a different
    step, so their count is a lower bound on the steps (stretches less than two samples
    apart are merged: a sample of loop code inside one step must not split it)."""
    category = attribution.categoriser(source)
    busy = [(st.t0, st.t1) for st in stalls]
    runs, last = 0, None
    for s in spans:
        if category(s.frames) not in PROGRESS:
            continue
        if any(a <= s.t0 < b for a, b in busy):
            continue
        if last is None or s.t0 - last > 0.5 * dt:
            runs += 1
        last = s.t1
    return runs


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
        if "/torch/" in frame[1].replace("\\", "/"):
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
    if prof.share("forward") >= 0.4:
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
    if prof.share("idle") >= 0.5:
        return "blocked"
    return "cpu"


def find_stalls(spans: Sequence[StackSpan], source: dict[tuple[str, int], str]) -> list[Stall]:
    gaps = _gaps(spans, source)
    if len(gaps) < 5:
        return []
    typical = statistics.median(b - a for a, b in gaps)
    limit = max(STALL_FACTOR * typical, typical + STALL_MIN_EXCESS_S)
    long_gaps = [(a, b) for a, b in gaps if b - a >= limit]
    step_chains = step_forward_chains(spans, source, long_gaps)
    out: list[Stall] = []
    for a, b in long_gaps:
        prof = attribution.window_profile(spans, source, [(a, b)])
        elsewhere = _other_forward_s(spans, source, (a, b), step_chains)
        cause = _cause(prof, b - a, typical, frozen(spans, a, b), elsewhere)
        if cause is not None:
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


def _runs(
    spans: Sequence[StackSpan], source: dict[tuple[str, int], str], cat: str
) -> list[Segment]:
    """Consecutive spans in one category, merged (a torch.save call seen as one segment)."""
    category = attribution.categoriser(source)
    out: list[Segment] = []
    for s in spans:
        if category(s.frames) != cat:
            continue
        if out and s.t0 - out[-1].t1 < 0.05:
            out[-1] = Segment(out[-1].t0, s.t1)
        else:
            out.append(Segment(s.t0, s.t1))
    return out


def build_ledger(
    spans: Sequence[StackSpan],
    source: dict[tuple[str, int], str],
    window: tuple[float, float],
    stalls: Sequence[Stall],
) -> Ledger:
    # the user's own tensor code before the backward call is the forward, as `run` splits it
    plain = attribution.categoriser(source)
    category = attribution.by_position(
        plain, attribution.backward_sites(spans, source, False, plain)
    )
    seconds = dict.fromkeys(BUCKETS, 0.0)
    windows = sorted((st.t0, st.t1, st) for st in stalls)
    starts = [w[0] for w in windows]
    for s in spans:
        lo, hi = max(s.t0, window[0]), min(s.t1, window[1])
        if hi <= lo:
            continue
        cat = category(s.frames)
        bucket = (
            attribution.data_part(s.frames) if cat == "data" else _CATEGORY_BUCKET.get(cat, "loop")
        )
        # The part inside a stall goes to the stall's bucket, beyond one typical step.
        i = bisect.bisect_right(starts, lo) - 1
        if i >= 0 and windows[i][1] > lo:
            st = windows[i][2]
            stall_bucket = _STALL_BUCKET.get(st.cause)
            if stall_bucket is not None:
                share = st.excess_s / max(1e-9, st.t1 - st.t0)
                seconds[stall_bucket] += (hi - lo) * share
                seconds[bucket] += (hi - lo) * (1 - share)
                continue
        seconds[bucket] += hi - lo
    covered = sum(seconds.values())
    total = window[1] - window[0]
    seconds["unattributed"] = max(0.0, total - covered)
    return Ledger(total, seconds, "stack samples")


def shares_of(led: Ledger) -> dict[str, float]:
    """Main-thread shares by activity (view.SHARES) from the ledger."""
    g = led.share
    return {
        "data": g("sampler", "worker_start", "fetch", "collate", "pin", "transfer", "data_wait"),
        "sampler": g("sampler"),
        "forward": g("forward"),
        "backward": g("backward"),
        "optimizer": g("optimizer"),
        "anomaly": g("anomaly"),
        "save": g("save"),
        "eval": g("eval"),
        "logging": g("logging"),
        "compile": g("compile"),
        "idle": g("idle", "stall_blocked"),
        "other": g("loop", "sync", "stall_compute"),
    }


def rate_estimate(
    rhythm: periodicity.Rhythm,
    window: tuple[float, float],
    stalls: Sequence[Stall],
    runs: int = 0,
) -> RateEstimate:
    span = window[1] - window[0]
    if rhythm.period_s is None:
        return _not_estimated(rhythm, _with_lower_bound(rhythm.reason, runs, span, rhythm.grid_s))
    lost = sum(st.excess_s for st in stalls if st.cause != "data")
    loop_s = span - lost
    if loop_s < periodicity.MIN_PERIODS * rhythm.period_s:
        return _not_estimated(
            rhythm,
            f"the loop ran {loop_s:.1f} s outside stalls: fewer than {periodicity.MIN_PERIODS} "
            "periods",
            rhythm.period_s,
        )
    steps = loop_s / rhythm.period_s + sum(1 for st in stalls if st.cause != "data")
    # A window of n periods overlaps up to n + 1 steps (a part of one at each end), and each
    # run is a step the window touched: compare the runs with that, or a correct rhythm over
    # a short window (8 steps at 2 it/s in 4 s, 9 runs) is rejected for its edges.
    if steps + 1 < MIN_OF_RUNS * runs:
        # More separate backward/optimizer stretches than the rhythm has steps: the rhythm
        # found is a pattern over several steps, not one step. The runs are a lower bound:
        # steps shorter than a few samples merge into one run, so whether --rate or
        # --duration helps cannot be told from them.
        return _not_estimated(
            rhythm,
            f"{_proven(runs, span)}, but its stacks repeat only every "
            f"{rhythm.period_s * 1e3:.0f} ms, a pattern over several steps (a higher --rate "
            "or a longer --duration may resolve them)",
        )
    return RateEstimate(
        steps / span,
        rhythm.period_s,
        periodicity.METHOD,
        rhythm.confidence,
        rhythm.score,
        rhythm.harmonics,
        None,
    )


def _not_estimated(
    rhythm: periodicity.Rhythm, reason: str | None, period_s: float | None = None
) -> RateEstimate:
    return RateEstimate(
        None, period_s, periodicity.METHOD, "none", rhythm.score, rhythm.harmonics, reason
    )


def _proven(runs: int, span: float) -> str:
    """The steps the stacks prove: separate backward/optimizer stretches are separate steps."""
    bound = window_rate(runs, span)
    return (
        f"the loop runs at least {bound:.{0 if bound >= 10 else 1}f} it/s ({runs} separate "
        f"backward/optimizer stretches in {span:.1f} s)"
    )


def _with_lower_bound(reason: str | None, runs: int, span: float, grid_s: float) -> str | None:
    """No rhythm: what the stacks still prove, the separate backward/optimizer stretches as a
    lower bound on it/s; and, where that bound comes near the fastest loop whose rhythm the
    sampling shows, that a faster loop needs a higher --rate (a loop of 830 it/s sampled at
    197 Hz showed no rhythm, and the report said only that)."""
    if not runs or span <= 0:
        return reason
    limit = 1.0 / (periodicity.SAMPLES_PER_STEP * grid_s)
    text = f"{reason}; {_proven(runs, span)}"
    if window_rate(runs, span) >= NEAR_LIMIT * limit:
        text += (
            f", and {1 / grid_s:.0f} stack samples a second show a rhythm up to ≈ {limit:.0f} "
            "it/s: a faster loop needs a higher --rate (or `trainprof run`, which times each step)"
        )
    return text


def window_rate(runs: int, span: float) -> float:
    return runs / span if span > 0 else 0.0


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


def target_spans(
    session: Session, att: dict[str, Any]
) -> list[tuple[dict[str, Any], list[StackSpan]]]:
    """Each attached process (one per rank of a torchrun job) with its main-thread stacks, in
    the order attached; loaded once for the per-rank views and the stillness."""
    raw = att.get("targets")
    targets: list[Any] = raw if isinstance(raw, list) else []
    return [
        (
            t,
            load_spans(
                Path(session.run_dir) / Path(t["file"]).name, float(t.get("started_at") or 0.0)
            ),
        )
        for t in targets
        if isinstance(t, dict) and isinstance(t.get("file"), str)
    ]


def _rank_views(
    att: dict[str, Any], loaded: list[tuple[dict[str, Any], list[StackSpan]]], rate_hz: int
) -> tuple[RankAttach, ...]:
    out = []
    raw = att.get("targets")
    if not isinstance(raw, list) or len(raw) < 2:
        return ()
    for t, spans in loaded:
        window = _window(spans)
        if window is None:
            continue
        from trainprof.store.session import _source_lines

        source = _source_lines(spans)
        rh, stalls = rate_of(spans, source, rate_hz, window)
        led = build_ledger(spans, source, window, stalls)
        rank = t.get("rank") if isinstance(t.get("rank"), int) else None
        out.append(
            RankAttach(
                int(t.get("pid") or 0),
                rank,
                rate_estimate(
                    rh, window, stalls, progress_runs(spans, source, stalls, 1 / rate_hz)
                ),
                shares_of(led),
                led.window_s,
            )
        )
    return tuple(out)


def compute(session: Session) -> Metrics:
    meta = session.meta
    att: dict[str, Any] = meta["attach"]
    rate_hz = int(att.get("rate_hz") or 100)
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
    counted = [st for st in stalls if st.cause in ("cpu", "blocked")]
    p = period([st.index for st in counted]) if len(counted) >= 3 and rate.steps_per_s else None
    gaps = [b.t0 - a.t0 for a, b in zip(counted, counted[1:], strict=False)]
    saves = _runs(spans, source, "save")
    evals = [Segment(st.t0, st.t1, "forward") for st in stalls if st.cause == "eval"]
    busy = [(st.t0, st.t1) for st in stalls]
    inside = {id(sp) for sp, _s in attribution.overlaps(spans, busy)}
    loop_spans = [sp for sp in spans if id(sp) not in inside]
    loop_funcs = loop_functions(loop_spans, source)
    growths = []
    if window is not None:
        for pid, series in session.samples.procs.items():
            role = "main" if pid == att.get("pid") else "worker"
            g = growth(series, role, *window)
            if g is not None:
                growths.append(g)
    swap_io = finite(
        a + b
        for a, b in zip(session.samples.swap_in_bps, session.samples.swap_out_bps, strict=True)
    )
    raw_workers = att.get("workers")
    workers: list[Any] = raw_workers if isinstance(raw_workers, list) else []
    activity = Activity(
        window=window,
        run_span_s=None,
        stalls=tuple(stalls),
        saves=tuple((seg, -1, "") for seg in saves),
        evals=tuple(evals),
        profile=attribution.profile(spans, source, *window) if window else None,
        loop_profile=attribution.profile(loop_spans, source, *window) if window else None,
        spans=spans,
        stacks_error=(meta.get("stacks") or {}).get("error"),
        growths=tuple(growths),
        mem_total=session.samples.mem_total,
        mem_available_min=min(finite(session.samples.mem_available), default=None),
        swap_total=session.samples.swap_total,
        swap_used_max=max(finite(session.samples.swap_used), default=None),
        swap_io_bps_mean=mean(swap_io) if swap_io else None,
        loop_funcs=loop_funcs,
        step_lines=attribution.step_lines(loop_spans, source, loop_funcs),
        framework=frameworks.detect(spans),
    )
    workers_by_pid = worker_spans(session)
    loaded = target_spans(session, att)
    still = stillness(session, spans, workers_by_pid, loaded)
    ranks = _rank_views(att, loaded, rate_hz)
    if still is not None and still.processes:
        held = {p.pid: p for p in still.processes}
        rate = _held_rate(rate, still.processes[0], still.window_s)
        ranks = tuple(
            replace(r, rate=_held_rate(r.rate, held.get(r.pid), still.window_s)) for r in ranks
        )
    view = OutsideView(
        pid=int(att.get("pid") or 0),
        given_pid=int(att.get("given_pid") or att.get("pid") or 0),
        note=att.get("note") if isinstance(att.get("note"), str) else None,
        rate_hz=rate_hz,
        sampled_s=led.window_s if led else 0.0,
        rate=rate,
        shares=shares_of(led) if led else {},
        stall_period_steps=p,
        stall_period_s=statistics.median(gaps) if len(gaps) >= 2 else None,
        workers=len(workers),
        workers_at_once=most_at_once(session, workers),
        target_exit=att.get("target_exit") if isinstance(att.get("target_exit"), str) else None,
        ranks=ranks,
        worker_spans=tuple(sp for spans in workers_by_pid.values() for sp in spans),
        stillness=still,
        py_spy_restarts=_restarts(att),
    )
    tree_rss = finite(session.samples.tree_rss)
    return Metrics(
        unit="step",
        total_steps=0,
        warmup_steps=0,
        warmup_s=None,
        time_to_first_step_s=None,
        steady=None,
        usable_cpus=meta.get("usable_cpus"),
        cpu_percent_mean=_window_mean(session, session.samples.tree_cpu, window),
        trainprof_cpu_percent_mean=_window_mean(session, session.samples.self_cpu, window),
        worker_load=worker_load(
            session.samples, (w["pid"] for w in workers if isinstance(w, dict)), window
        ),
        cpu_starvation=cpu_starvation(
            session.samples,
            att.get("pid"),
            window,
            meta.get("usable_cpus"),
            meta.get("cpu_count"),
        ),
        peak_rss_bytes=int(max(tree_rss)) if tree_rss else None,
        gpu_util_mean=_window_mean(session, session.samples.gpu_util, window),
        gpu_unavailable=session.samples.gpu_unavailable,
        gpus=session.samples.job_gpus,
        machine_gpus=machine_utils(session.samples, window),
        torch_seen=any("torch/" in f[1] for s in spans[:2000] for f in s.frames),
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


def _restarts(att: dict[str, Any]) -> int:
    """How often py-spy was started again on the main process (0 in runs stored before)."""
    targets = att.get("targets")
    first = targets[0] if isinstance(targets, list) and targets else None
    n = first.get("py_spy_restarts") if isinstance(first, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) else 0


def most_at_once(session: Session, workers: list[Any]) -> int | None:
    """The most DataLoader workers alive at one tick of the host sampler (None: it saw none)."""
    pids = {w.get("pid") for w in workers if isinstance(w, dict)}
    alive = Counter(t for pid, s in session.samples.procs.items() if pid in pids for t in s.t)
    return max(alive.values()) if alive else None


def worker_spans(session: Session) -> dict[int, list[StackSpan]]:
    """Each DataLoader worker's main-thread stacks, by pid (their files are named in run.json)."""
    att = session.meta.get("attach") or {}
    out: dict[int, list[StackSpan]] = {}
    for w in att.get("workers") or []:
        if isinstance(w, dict) and isinstance(w.get("file"), str):
            spans = load_spans(Path(session.run_dir) / Path(w["file"]).name, 0.0)
            out.setdefault(int(w.get("pid") or 0), []).extend(spans)
    return out
