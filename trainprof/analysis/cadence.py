"""How often a line runs, from stack samples alone: in every step, or in bursts every few steps.

Between two runs of the line, count the training steps that went by (runs of backward or
optimizer samples). A line of every step's overhead has about one step between its runs; a
periodic task (a re-ranking, a search every 25 steps) comes in bursts with several steps
between them. The time structure tells a stall from overhead where no probe timed the steps
(``attach``), and where a burst was too short to pass for a stall. Pure.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable

from trainprof.store.stacks import Frame, StackSpan

EVERY_STEP = "every step"
PERIODIC = "periodic"
PERIODIC_STEPS = 3  # the median count of steps between the line's runs, for a periodic line
MIN_RUNS = 3  # the line's runs needed to judge


def cadence(
    spans: Iterable[StackSpan],
    frame: Frame,
    progress: Callable[[tuple[Frame, ...]], bool],
) -> str | None:
    """``PERIODIC`` or ``EVERY_STEP`` for the stacks that run ``frame`` (in time order), by the
    steps (``progress`` stacks, runs of them) between its runs; None with too few runs."""
    between: list[int] = []
    steps = 0
    in_line = in_step = seen = False
    for s in spans:
        if frame in s.frames:
            if not in_line and seen:
                between.append(steps)
            in_line = seen = True
            steps, in_step = 0, False
            continue
        in_line = False
        step = progress(s.frames)
        if step and not in_step:
            steps += 1
        in_step = step
    if len(between) < MIN_RUNS - 1:
        return None
    return PERIODIC if statistics.median(between) >= PERIODIC_STEPS else EVERY_STEP
