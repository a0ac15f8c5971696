"""Whether a torch profiler recorded the steady run: profiler-left-on's threshold, which
memory-growth also reads (a recording profiler's events are the main process's growth)."""

from __future__ import annotations

from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules.registry import Threshold

ON = Threshold("on", 0.5, "share", "a profiler recorded for at least this share of the run")


def share(m: Metrics) -> float | None:
    """The share of the steady run a profiler recorded (None: not read)."""
    debug, window = m.activity.debug, m.activity.window
    if debug is None or window is None:
        return None
    return debug.profiler_share(*window)


def recording(m: Metrics) -> bool:
    """A profiler recorded most of the steady run: the main process's memory growth is its
    events (profiler-left-on says so, memory-growth leaves it out)."""
    on = share(m)
    return on is not None and on >= ON.value
