"""What the two stall rules (CPU work, blocked waiting) share: which stalls count, their
period, and where the loop calls the code that stalls."""

from __future__ import annotations

from dataclasses import dataclass

from trainprof.analysis.attribution import CallSite, dominant_user_frame, function_share
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._common import ms, site
from trainprof.analysis.rules.registry import Threshold
from trainprof.analysis.stalls import STALL_FACTOR, STALL_MIN_EXCESS_S, Stall, period
from trainprof.units import plural

SLOW = Threshold(
    "stall_factor", STALL_FACTOR, "ratio", "a stalled step takes this many median steps"
)
EXCESS = Threshold("stall_excess", STALL_MIN_EXCESS_S, "s", "and at least this much longer")
MIN_COUNT = Threshold("min_count", 3, "count", "stalled steps at least")
SHARE = Threshold("share", 0.05, "share", "their time beyond a median step, of the steady run")
# Without a period, stalls count only when one user function holds the main thread for most
# of the stall time and rarely otherwise (so a noisy machine's slow steps are not "stalls").
OWN_SHARE = 0.5
ELSEWHERE_MAX = 0.2
# Stalls of the loop's own code are slow steps, not work of their own, when the main thread's
# wait for a CPU over the steady window is at least this share of their time.
WAIT_COVERS = 0.5


@dataclass(frozen=True)
class Stalls:
    stalls: list[Stall]
    cost_s: float
    share: float
    period: int | None
    site: CallSite | None


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
    distinct = _distinct_code(m, windows)
    if p is None and not distinct:
        return None
    if cause == "cpu" and not distinct and _waited_for_a_cpu(m, led.get(bucket)):
        # The loop's own code, only slower, while its thread waited for a CPU: a quota's
        # throttling pauses the job every period, and those pauses come as regular as any
        # periodic task's (every 5 steps, once named CPU work "in the training loop itself").
        # cpu-starved names that wait and its cause.
        return None
    return Stalls(stalls, led.get(bucket), share, p, site(m, windows))


def _waited_for_a_cpu(m: Metrics, stalls_s: float) -> bool:
    """The main thread waited, runnable, for a CPU at least half as long as the stalls took."""
    s, w = m.cpu_starvation, m.activity.window
    return s is not None and w is not None and s.runq * (w[1] - w[0]) >= WAIT_COVERS * stalls_s


def _distinct_code(m: Metrics, stall_windows: list[tuple[float, float]]) -> bool:
    frame = dominant_user_frame(m.activity.spans, stall_windows)
    if frame is None or m.activity.window is None:
        return False
    func = (frame[0], frame[1])
    inside = function_share(m.activity.spans, stall_windows, func)
    w0, w1 = m.activity.window
    gaps, last = [], w0
    for a, b in sorted(stall_windows):
        if a > last:
            gaps.append((last, a))
        last = max(last, b)
    if w1 > last:
        gaps.append((last, w1))
    elsewhere = function_share(m.activity.spans, gaps, func)
    return inside >= OWN_SHARE and elsewhere <= ELSEWHERE_MAX


def evidence(m: Metrics, found: Stalls, doing: str) -> list[str]:
    """How often, how long, what it cost, what the main thread did, and where."""
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
    return lines


def every(found: Stalls) -> str:
    return f"every {found.period} steps" if found.period else "repeatedly"


def _where_lines(m: Metrics, found: Stalls) -> list[str]:
    cs = found.site
    if cs is not None:
        line = cs.sentence
        if cs.hot is not None:
            line += f"; the hot line is {cs.hot_where}"
        return [line]
    if m.activity.stacks_error or not m.activity.spans:
        return ["no stack samples to name the code (py-spy unavailable)"]
    return []
