"""What attach measured that `trainprof run` measures otherwise: the estimated iteration rate,
the main thread's shares by activity, and what was sampled. Plain data (Metrics carries it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainprof.store.stacks import Frame, StackSpan

# Main-thread activities by stack category (analysis/attribution.py), as the report names them.
SHARES = (
    ("data", "data loading"),
    ("sampler", "the sampler"),
    ("forward", "forward"),
    ("backward", "backward"),
    ("optimizer", "optimizer step"),
    ("anomaly", "autograd anomaly detection"),
    ("save", "checkpoint saves"),
    ("eval", "evaluation"),
    ("logging", "logging"),
    ("compile", "torch.compile"),
    ("idle", "idle (sleeping or waiting)"),
    ("other", "other loop code"),
)


@dataclass(frozen=True)
class RateEstimate:
    """Iterations per second, or why not; never a number that was not derived from samples."""

    steps_per_s: float | None
    period_s: float | None  # the loop's step period, outside stalls
    method: str
    confidence: str  # "high" | "medium" | "low" | "none"
    score: float  # the autocorrelation peak (0..1)
    harmonics: int
    reason: str | None  # why not estimated

    def to_json(self) -> dict[str, Any]:
        return {
            "steps_per_s": None if self.steps_per_s is None else round(self.steps_per_s, 3),
            "period_s": None if self.period_s is None else round(self.period_s, 6),
            "method": self.method,
            "confidence": self.confidence,
            "score": round(self.score, 3),
            "harmonics": self.harmonics,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class HeldStack:
    """One sampled process's main thread: the stack it held longest, and for what share."""

    role: str  # "main" | "rank N" | "worker"
    pid: int
    frames: tuple[Frame, ...]  # outermost first
    share: float  # of the time its stacks were sampled
    cpus: float | None  # CPUs the process used on average (None: not sampled)
    fds: int | None = None  # the most file descriptors it had open (None: not sampled)
    nofile: tuple[int, int] | None = None  # its open-file limit, soft and hard


@dataclass(frozen=True)
class Stillness:
    """Whether the attached job moved at all: each sampled process's most-held stack, and what
    the job's processes read and wrote meanwhile (analysis/stillness.py reads it; the hang
    verdict judges it)."""

    window_s: float
    processes: tuple[HeldStack, ...]  # the main process first
    io_bytes: int | None  # read and written over the window (None: not readable)
    rss_change: int | None  # the job's RSS, highest less lowest over the window (None: unread)
    cpus: float | None  # CPUs the job's processes used on average (None: not sampled)


@dataclass(frozen=True)
class RankAttach:
    pid: int
    rank: int | None
    rate: RateEstimate
    shares: dict[str, float]
    sampled_s: float

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "rank": self.rank,
            "iterations": self.rate.to_json(),
            "shares": {k: round(v, 4) for k, v in self.shares.items()},
            "sampled_s": round(self.sampled_s, 3),
        }


@dataclass(frozen=True)
class OutsideView:
    pid: int  # the process analysed (rank 0 of several)
    given_pid: int
    note: str | None
    rate_hz: int
    sampled_s: float  # main-thread time covered by stack samples
    rate: RateEstimate
    shares: dict[str, float]  # main-thread share by activity (SHARES keys)
    stall_period_steps: int | None
    stall_period_s: float | None
    workers: int  # DataLoader worker processes seen
    # The most of them alive at one host sample (None: none sampled): fewer than ``workers``,
    # they were started again and again (each epoch, without persistent_workers=True)
    workers_at_once: int | None
    target_exit: str | None  # "exited during sampling after N s" or None (still running)
    ranks: tuple[RankAttach, ...] = ()
    # py-spy stopped by itself on the live process and was started again: its stacks have gaps
    py_spy_restarts: int = 0
    worker_spans: tuple[StackSpan, ...] = ()  # DataLoader workers' main threads (not in JSON)
    stillness: Stillness | None = None  # what moved in the window (not in JSON: the hang says it)

    @property
    def workers_restarted(self) -> bool:
        return self.workers_at_once is not None and self.workers > self.workers_at_once

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "given_pid": self.given_pid,
            "note": self.note,
            "rate_hz": self.rate_hz,
            "sampled_s": round(self.sampled_s, 3),
            "iterations": self.rate.to_json(),
            "shares": {k: round(v, 4) for k, v in self.shares.items()},
            "stall_period_steps": self.stall_period_steps,
            "stall_period_s": None
            if self.stall_period_s is None
            else round(self.stall_period_s, 3),
            "workers": self.workers,
            "workers_at_once": self.workers_at_once,
            "target_exit": self.target_exit,
            "py_spy_restarts": self.py_spy_restarts,
            "ranks": [r.to_json() for r in self.ranks],
        }
