"""Periodic work or every step's, from stack samples alone (analysis/cadence.py): a function
seen in bursts with several steps between them is a periodic stall, one seen in every step
is overhead; and attach finds such bursts as stalls even where a torn sample cuts one under
three typical steps (analysis/gap_stalls.py)."""

from __future__ import annotations

import random

from trainprof.analysis.attribution import categoriser
from trainprof.analysis.cadence import EVERY_STEP, PERIODIC, cadence
from trainprof.analysis.gap_stalls import find_stalls
from trainprof.store.stacks import Frame, StackSpan

TRAIN = "/home/user/proj/train.py"
TORCH = "/venv/site-packages/torch"
FORWARD = (("<module>", TRAIN, 1), ("Module._call_impl", f"{TORCH}/nn/modules/module.py", 1))
BACKWARD = (("<module>", TRAIN, 3), ("backward", f"{TORCH}/autograd/__init__.py", 1))
RERANK_LINE = ("rerank_beams", TRAIN, 41)
RERANK = (("<module>", TRAIN, 14), RERANK_LINE)
METRICS_LINE = ("update_metrics", TRAIN, 52)
METRICS = (("<module>", TRAIN, 16), METRICS_LINE)


def sampled(every: int | None, burst_s: float, overhead: bool, steps: int = 300) -> list[StackSpan]:
    """py-spy's view, every 20 ms, of a loop of ~0.1 s steps (forward, backward, and with
    ``overhead`` per-step metrics); every ``every`` steps a re-ranking of ``burst_s``, and in a
    tenth of the bursts a torn sample that shows a backward frame in the middle of it."""
    rng = random.Random(3)
    phases: list[tuple[float, tuple[Frame, ...]]] = []
    t = 0.0
    for i in range(steps):
        if every and i % every == every - 1:
            torn = rng.random() < 0.1
            half = burst_s / 2
            phases += [(t + half, RERANK)]
            if torn:
                phases += [(t + half + 0.005, BACKWARD)]
            phases += [(t + burst_s, RERANK)]
            t += burst_s + (0.005 if torn else 0.0)
        d = rng.uniform(0.08, 0.12)
        parts = [(0.4, FORWARD), (0.3, METRICS if overhead else FORWARD), (0.3, BACKWARD)]
        for share, frames in parts:
            t += share * d
            phases.append((t, frames))
    spans, k, at = [], 0, 0.0
    while at < t:
        while phases[k][0] <= at:
            k += 1
        spans.append(StackSpan(at, at + 0.02, phases[k][1]))
        at += 0.02
    return spans


def progress(frames: tuple[Frame, ...]) -> bool:
    return categoriser({})(frames) in ("backward", "optimizer")


def test_a_function_in_bursts_every_25_steps_is_periodic() -> None:
    spans = sampled(25, 0.3, overhead=True)
    assert cadence(spans, RERANK_LINE, progress) == PERIODIC
    assert cadence(spans, METRICS_LINE, progress) == EVERY_STEP


def test_attach_finds_the_bursts_as_stalls_even_when_short() -> None:
    """Bursts of 1.2 steps (gaps of ~2.5 typical ones), each of its own code: every one is a CPU stall, whatever
    torn sample cut it."""
    spans = sampled(25, 0.12, overhead=False)
    stalls = find_stalls(spans, {})
    assert len(stalls) >= 10, stalls
    assert {st.cause for st in stalls} == {"cpu"}


def test_a_healthy_loop_has_no_short_stalls() -> None:
    assert find_stalls(sampled(None, 0.0, overhead=True), {}) == []
