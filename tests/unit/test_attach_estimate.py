"""The iteration rate from the rhythm of the main thread's stacks (analysis/periodicity.py), on
span sequences shaped like py-spy's: a loop of data → forward → backward → optimizer phases
with jittered lengths, sampled at the attach rate."""

from __future__ import annotations

import random

import pytest

from trainprof.analysis import periodicity, rate_estimate
from trainprof.store.stacks import StackSpan

PHASES = (("data", 0.3), ("forward", 0.3), ("backward", 0.3), ("optimizer", 0.1))


def loop_spans(rate: float, seconds: float, jitter: float, seed: int = 0) -> list[StackSpan]:
    """Spans of a loop at ``rate`` it/s whose step lengths vary by ±jitter."""
    rng = random.Random(seed)
    t, out = 0.0, []
    while t < seconds:
        step = (1.0 / rate) * (1 + rng.uniform(-jitter, jitter))
        for name, share in PHASES:
            out.append(StackSpan(t, t + step * share, ((name, f"/{name}.py", 1),)))
            t += step * share
    return out


def estimate_rate(spans: list[StackSpan], rate_hz: int) -> periodicity.Rhythm:
    dt = 1.0 / rate_hz
    states = periodicity.state_series(spans, spans[0].t0, spans[-1].t1, dt, lambda s: s.frames)
    return periodicity.rhythm(states, dt, spans[-1].t1 - spans[0].t0)


@pytest.mark.parametrize("rate", [2.0, 7.0, 20.0, 50.0])
def test_a_steady_loop_rate_is_found_within_a_few_percent(rate: float) -> None:
    r = estimate_rate(loop_spans(rate, 6.0, jitter=0.1), 200)
    assert r.period_s is not None, r.reason
    assert abs(1.0 / r.period_s - rate) / rate < 0.05
    assert r.confidence in ("high", "medium")


def test_a_pattern_every_few_steps_does_not_hide_the_step() -> None:
    """A log line every third step makes lag 3 the strongest peak; the step is still lag 1."""
    spans = []
    for i, s in enumerate(loop_spans(10.0, 6.0, jitter=0.05)):
        logging = s.frames[0][0] == "optimizer" and (i // 4) % 3 == 0
        spans.append(StackSpan(s.t0, s.t1, (("print", "/log.py", 1),)) if logging else s)
    r = estimate_rate(spans, 200)
    assert r.period_s is not None
    assert abs(1.0 / r.period_s - 10.0) < 0.5


def test_no_rhythm_gives_no_number() -> None:
    """Random states of random lengths (up to 200 ms): a period is claimed at most once in 50."""
    claimed = 0
    for seed in range(50):
        rng = random.Random(seed)
        t, spans = 0.0, []
        while t < 5.0:
            d = rng.uniform(0.001, 0.2)
            spans.append(StackSpan(t, t + d, ((rng.choice("abcd"), "/x.py", 1),)))
            t += d
        r = estimate_rate(spans, 200)
        if r.period_s is not None:
            claimed += 1
        else:
            assert r.confidence == "none" and r.reason
    assert claimed <= 1


def test_fewer_steps_than_the_stacks_prove_is_not_a_rate() -> None:
    """A rhythm of 10 it/s while 200 separate backward/optimizer stretches were seen in 5 s:
    the rhythm is a pattern over several steps."""
    rhythm = periodicity.Rhythm(0.1, 0.4, 5, 0.005)
    r = rate_estimate.rate_estimate(rhythm, (0.0, 5.0), [], runs=200)
    assert r.steps_per_s is None and "at least 40 it/s" in (r.reason or "")
    assert "(200 separate backward/optimizer stretches in 5.0 s)" in (r.reason or "")
    assert "repeat only every 100 ms" in (r.reason or "")
    ok = rate_estimate.rate_estimate(rhythm, (0.0, 5.0), [], runs=45)
    assert ok.steps_per_s == pytest.approx(10.0)


def test_no_rhythm_still_gives_the_steps_the_stacks_prove() -> None:
    """No rhythm in 120 s at 197 Hz (a loop of 830 it/s, attached for real): the 3906 separate
    backward/optimizer stretches still prove 33 it/s, near the 79 it/s that sampling resolves,
    so the reason says a higher --rate is needed. A slow irregular loop gets the bound alone."""
    none = periodicity.Rhythm(None, 0.04, 0, 1 / 197, "no steady rhythm")
    fast = rate_estimate.rate_estimate(none, (0.0, 120.0), [], runs=3906)
    assert fast.steps_per_s is None and fast.confidence == "none"
    assert (fast.reason or "").startswith("no steady rhythm; the loop runs at least 33 it/s")
    assert "up to ≈ 79 it/s: a faster loop needs a higher --rate" in (fast.reason or "")
    slow = rate_estimate.rate_estimate(none, (0.0, 120.0), [], runs=180)
    assert "at least 1.5 it/s (180 separate" in (slow.reason or "")
    assert "--rate" not in (slow.reason or "")
    assert rate_estimate.rate_estimate(none, (0.0, 120.0), [], runs=0).reason == "no steady rhythm"


def test_a_short_window_s_partial_steps_at_its_edges_are_not_held_against_the_rhythm() -> None:
    """A 2 it/s loop sampled for 3.85 s: 7.55 periods of 510 ms, and 9 separate stretches (a
    part of a step at each end): the rhythm is right (the CI failure this guards against). A
    rhythm of twice the period, a pattern over two steps, is still rejected."""
    window = (0.0, 3.85)
    right = rate_estimate.rate_estimate(
        periodicity.Rhythm(0.51, 0.7, 2, 1 / 197), window, [], runs=9
    )
    assert right.steps_per_s == pytest.approx(7.55 / 3.85, rel=0.01)
    double = rate_estimate.rate_estimate(
        periodicity.Rhythm(1.02, 0.7, 2, 1 / 197), (0.0, 8.0), [], runs=17
    )
    assert double.steps_per_s is None and "every 1020 ms" in (double.reason or "")


def test_too_short_a_sample_is_not_estimated() -> None:
    r = estimate_rate(loop_spans(2.0, 1.2, jitter=0.0), 200)
    assert r.period_s is None and r.reason


def test_autocorrelation_of_one_state_is_flat() -> None:
    assert periodicity.autocorrelation([3] * 50, 5) == [0.0] * 6
