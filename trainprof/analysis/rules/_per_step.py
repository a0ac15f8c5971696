"""The loop's hottest line of host work or waiting, outside stalls, and the kind of work it does:
what loop-overhead (host CPU work every step) and blocking-stall (a wait every step) judge."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from trainprof.analysis import work_kind
from trainprof.analysis.attribution import Profile, categoriser
from trainprof.analysis.cadence import PERIODIC, cadence
from trainprof.analysis.costly_calls import HotLine, hot_line
from trainprof.analysis.ledger import Ledger
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._common import loop_time
from trainprof.store.stacks import Frame


@dataclass(frozen=True)
class HotWork:
    """The loop's hottest line outside stalls: its frame, kind of work, text and known call."""

    prof: Profile
    led: Ledger
    loop_s: float  # the loop's own time (the steady window outside stalls, less its CPU wait)
    frame: Frame | None
    kind: str | None
    hot: HotLine | None
    at_line: float  # the line's share of the loop's sampled time

    @property
    def waits(self) -> bool:
        return self.kind in work_kind.WAITS

    @property
    def buckets(self) -> tuple[str, ...]:
        """A wait costs the loop its idle time too (off the CPU), host work its loop time."""
        return ("loop", "idle") if self.waits else ("loop",)

    @property
    def share(self) -> float:
        return self.led.get(*self.buckets) / self.loop_s if self.loop_s > 0 else 0.0

    @property
    def sampled_s(self) -> float:
        p = self.prof.seconds
        return p.get("other", 0.0) + (p.get("idle", 0.0) if self.waits else 0.0)


def hot_work(m: Metrics) -> HotWork | None:
    """The loop's hottest line of host work or waiting (None without a loop profile)."""
    prof, led = m.activity.loop_profile, m.ledger
    if prof is None or led is None:
        return None
    # its wait for a CPU (another process's load) is cpu-starved's, and would shrink every
    # share of the loop's own work alike
    loop = loop_time(m) - led.get("cpu_wait")
    lines = prof.lines.get("other", Counter()) + prof.lines.get("idle", Counter())
    frame = lines.most_common(1)[0][0] if lines else None
    kind = work_kind.dominant(m.activity.spans, m.activity.source, frame) if frame else None
    hot = hot_line(frame, m.activity.source, m.activity.spans)
    at_line = lines[frame] / 1e6 / prof.total if frame and prof.total > 0 else 0.0
    return HotWork(prof, led, loop, frame, kind, hot, at_line)


def periodic(m: Metrics, frame: Frame) -> bool:
    """From stacks alone, the line runs in bursts with several steps between them."""
    category_of = categoriser(dict(m.activity.source))

    def progress(frames: tuple[Frame, ...]) -> bool:
        return category_of(frames) in ("backward", "optimizer")

    return cadence(m.activity.spans, frame, progress) == PERIODIC
