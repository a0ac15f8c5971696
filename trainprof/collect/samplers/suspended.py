"""When the job is stopped by a signal (SIGSTOP, Ctrl-Z's SIGTSTP): read from /proc, timed.

A stopped job makes no step, and that silence is no hang and no stall of its code: a scheduler
suspended it, or a user pressed Ctrl-Z. Its processes are in state ``T`` until a SIGCONT.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


def is_stopped(pid: int) -> bool:
    """Whether the process is stopped by a signal (state ``T``; ``t``, a tracer's stop, is not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    # the state follows the command name, which may hold spaces and parentheses
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] == b"T"


@dataclass
class Suspensions:
    """The spans the job's processes were stopped by a signal, fed by ``update``."""

    started_at: float  # the job's launch, monotonic
    since: float | None = None  # stopped now, since then
    spans: list[tuple[float, float]] = field(default_factory=list)  # (from, to), monotonic

    def update(self, pids: Iterable[int], now: float) -> tuple[float, float] | None:
        """Look at the processes now; the span that just ended, when the job was continued
        since the last look."""
        stopped = any(is_stopped(pid) for pid in pids)
        if stopped and self.since is None:
            self.since = now
        elif not stopped and self.since is not None:
            span = (self.since, now)
            self.spans.append(span)
            self.since = None
            return span
        return None

    @property
    def stopped(self) -> bool:
        return self.since is not None

    @property
    def last_end(self) -> float | None:
        """When the job was last seen stopped (now, while it is)."""
        return self.spans[-1][1] if self.spans else None

    def finish(self, now: float) -> dict[str, Any] | None:
        """run.json's ``suspended``: ``{"total_s", "spans": [{"at_s", "for_s"}]}`` (seconds
        since the job's launch), or None when the job was never seen stopped."""
        if self.since is not None:
            self.spans.append((self.since, now))
            self.since = None
        if not self.spans:
            return None
        return {
            "total_s": round(sum(b - a for a, b in self.spans), 2),
            "spans": [
                {"at_s": round(a - self.started_at, 2), "for_s": round(b - a, 2)}
                for a, b in self.spans
            ],
        }
