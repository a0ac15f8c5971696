"""What the two stall rules (CPU work, blocked waiting) share: which stalls count, their
period, and where the loop calls the code that stalls."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

from trainprof.analysis import work_kind
from trainprof.analysis.attribution import overlaps
from trainprof.analysis.call_sites import CallSite
from trainprof.analysis.costly_calls import HotLine, hot_line
from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._common import ms, site
from trainprof.analysis.rules.registry import Threshold
from trainprof.analysis.stalls import STALL_FACTOR, STALL_MIN_EXCESS_S, Stall, distinct_code, period
from trainprof.analysis.stats import rising
from trainprof.units import plural

SLOW = Threshold(
    "stall_factor", STALL_FACTOR, "ratio", "a stalled step takes this many median steps"
)
EXCESS = Threshold("stall_excess", STALL_MIN_EXCESS_S, "s", "and at least this much longer")
MIN_COUNT = Threshold("min_count", 3, "count", "stalled steps at least")
SHARE = Threshold("share", 0.05, "share", "their time beyond a median step, of the steady run")


@dataclass(frozen=True)
class Stalls:
    stalls: list[Stall]
    cost_s: float
    share: float
    period: int | None
    site: CallSite | None
    hot: HotLine | None = None  # the site's hot line, its text and the costly call it makes


def judge(m: Metrics, cause: str, bucket: str) -> Stalls | None:
    stalls = [s for s in m.activity.stalls if s.cause == cause]
    led = m.ledger
    if len(stalls) < MIN_COUNT.value or led is None:
        return None
    share = led.share(bucket)
    if share < SHARE.value:
        return None
    p = period([s.index for s in stalls])
    p = p if p is not None and p >= 2 else None
    windows = [(s.t0, s.t1) for s in stalls]
    # Without a period, stalls count only when they run code of their own, so a noisy
    # machine's slow steps are not "stalls".
    w = m.activity.window
    if p is None and (w is None or not distinct_code(m.activity.spans, windows, w)):
        return None
    cs = site(m, windows)
    hot = hot_line(cs.hot, m.activity.source, m.activity.spans) if cs else None
    return Stalls(stalls, led.get(bucket), share, p, cs, hot)


def evidence(m: Metrics, found: Stalls, doing: str) -> list[str]:
    """How often, how long, what it cost, what the main thread did, and where."""
    if m.basis.by_stacks:
        return _stacks_evidence(m, found, doing)
    assert m.steady is not None
    n, p = len(found.stalls), found.period
    length = sum(s.excess_s for s in found.stalls) / n
    lines = [
        f"{plural(n, 'step')} took {ms(length + m.steady.p50_s)} on average instead of "
        f"{ms(m.steady.p50_s)}" + (f", every {p} steps" if p else " (irregular)"),
        f"the stalls cost {found.cost_s:.2f} s, {found.share:.0%} of the steady run; the main "
        f"thread was {doing}",
        *_where_lines(m, found),
    ]
    if m.activity.main_cpu_in_stalls is not None:
        lines.append(f"the main process used {m.activity.main_cpu_in_stalls:.0f}% CPU meanwhile")
    grows = rising([s.excess_s for s in found.stalls])
    if grows is not None:
        lines.append(
            f"each stall is longer than the last: {ms(grows[0])} beyond a median step at first, "
            f"{ms(grows[1])} at the end; the work grows with the run, so what it runs over is "
            "never trimmed (a bank, a history, a list kept across steps)"
        )
    return lines


def every(m: Metrics, found: Stalls) -> str:
    """How often the stalls came: in steps, else in seconds where only stacks timed them."""
    if found.period:
        return (
            f"every {found.period} steps"
            if not m.basis.by_stacks
            else f"every ~{found.period} steps"
        )
    gap = m.outside.stall_period_s if m.outside is not None else None
    return f"every {gap:.2f} s" if gap else "repeatedly"


def _stacks_evidence(m: Metrics, found: Stalls, doing: str) -> list[str]:
    """The stalls as stack samples alone timed them: gaps between training steps' stacks."""
    a = m.outside
    assert a is not None
    n = len(found.stalls)
    length = sum(st.t1 - st.t0 for st in found.stalls) / n
    when = ""
    if found.period:
        when = f", every ~{found.period} steps by the estimated step period"
        if a.stall_period_s:
            when += f" (every {a.stall_period_s:.2f} s)"
    elif a.stall_period_s:
        when = f", every {a.stall_period_s:.2f} s (the median time between their starts)"
    lines = [
        f"{plural(n, 'stall')} of {ms(length)} on average between training steps{when}",
        f"the stalls cost {found.cost_s:.2f} s, {found.share:.0%} of {m.basis.of}; the main "
        f"thread was {doing}",
    ]
    cs = found.site
    if cs is not None:
        lines.append(cs.sentence + (f"; the hot line is {cs.hot_where}" if cs.hot else ""))
        if found.hot is not None and found.hot.text:
            lines.append(found.hot.evidence)
    return lines


def _where_lines(m: Metrics, found: Stalls) -> list[str]:
    cs = found.site
    if cs is not None:
        line = cs.sentence
        if cs.hot is not None:
            line += f"; the hot line is {cs.hot_where}"
        return [line] + ([found.hot.evidence] if found.hot and found.hot.text else [])
    if m.activity.stacks_error or not m.activity.spans:
        why = m.activity.stacks_error or "py-spy did not run"
        return [f"no stack samples to name the code ({why})"]
    return []


def stall_kind(m: Metrics, found: Stalls) -> str | None:
    """The kind of work that fills the stalls (work_kind): what to say they do, and its fix."""
    kinds: Counter[str] = Counter()
    windows = [(s.t0, s.t1) for s in found.stalls]
    for span, seconds in overlaps(m.activity.spans, windows):
        kinds[work_kind.of_frames(span.frames, m.activity.source)] += int(seconds * 1e6)
    return kinds.most_common(1)[0][0] if kinds else None


def with_kind(f: Finding, found: Stalls, kind: str | None) -> Finding:
    """The finding with its kind of work's fix first, where the table knows no call on the hot
    line and the kind has a fix of its own (a wait, numpy, pickling, GC)."""
    known = found.hot is not None and found.hot.call is not None
    if known or kind is None or kind in (work_kind.PYTHON, work_kind.TORCH):
        return f
    return replace(f, fix=(work_kind.FIX[kind], *f.fix))
