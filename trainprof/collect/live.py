"""What the runner knows while the job runs: steps so far, recent rate, data wait, last step.

Fed by tailing the event files; keeps a fixed-size window, so memory stays flat however long
the job runs. The status line is drawn only on a terminal and only between whole lines of
the job's output.
"""

from __future__ import annotations

import collections
import contextlib
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from trainprof.collect.live_judge import LiveJudge
from trainprof.collect.output import TerminalLock, write_all
from trainprof.render.text import no_color
from trainprof.store import gpus
from trainprof.store.events import EventTail
from trainprof.store.schema import BACKWARD, BATCH, STEP
from trainprof.units import fmt_bytes

WINDOW = 256


MEDIAN_EVERY = 32
STALL_RATIO = 3.0
STALL_MIN_S = 0.02
ACTIVE_S = 5.0  # a process whose last step is this much older than the newest is done


@dataclass
class LiveStats:
    """The job's progress from its event files, each stepping process in its own window. The
    ranks of a distributed job step together: the job's steps are the most any rank made, its
    it/s a rank's (the mean over the ranks stepping now) and its samples/s their sum, as the
    report counts them; processes that train one after another (a sweep) add up."""

    steps: int = 0
    batches: int = 0
    backwards: int = 0  # backward() returns of a job with neither an optimizer nor a DataLoader
    last_progress: float | None = None  # monotonic time of the newest step, batch or backward
    # pid → (t_end, dur_s, wait_s, samples) of its recent steps
    recent: dict[int, collections.deque[tuple[float, float, float, int]]] = field(
        default_factory=dict
    )
    stepping: dict[int, dict[str, Any]] = field(default_factory=dict)  # pid → header
    per_step_s: collections.deque[float] = field(
        default_factory=lambda: collections.deque(maxlen=WINDOW)
    )
    # the gaps between a process's batches, and between its backward passes: the pace of a
    # job without an optimizer step (the gap's first is its warm-up, as a first step is)
    per_batch_s: collections.deque[float] = field(
        default_factory=lambda: collections.deque(maxlen=WINDOW)
    )
    per_backward_s: collections.deque[float] = field(
        default_factory=lambda: collections.deque(maxlen=WINDOW)
    )
    last_at: dict[tuple[int, str], float] = field(default_factory=dict)  # (pid, kind) → time
    rank_steps: dict[int, int] = field(default_factory=dict)  # steps of each rank
    other_steps: int = 0  # steps of processes that are no rank
    stalls: int = 0  # steps 3× the median step and 20 ms more (a stall, in the glossary's words)
    stall_s: float = 0.0  # their time beyond a median step
    _median_s: float = 0.0  # the median step, recomputed every MEDIAN_EVERY steps

    def feed(self, header: dict[str, Any], line: str) -> None:
        if header.get("role") == "worker":
            return
        kind = line[:1]
        if kind in (STEP, BATCH, BACKWARD):
            self.stepping.setdefault(int(header.get("pid", -1)), header)
        if kind == STEP:
            f = line.split()
            t = float(header["t0"]) + int(f[1]) / 1e6
            dur, wait = int(f[2]) / 1e6, int(f[3]) / 1e6
            pid = int(header.get("pid", -1))
            if header.get("role") == "rank":
                self.rank_steps[pid] = self.rank_steps.get(pid, 0) + 1
            else:
                self.other_steps += 1
            self.steps = self.other_steps + max(self.rank_steps.values(), default=0)
            window = self.recent.get(pid)
            if window is None:
                window = self.recent[pid] = collections.deque(maxlen=WINDOW)
                self._forget_done(t)
            elif window:
                self.per_step_s.append(dur)  # (a process's first step is its warm-up)
                self._count_stall(dur)
            window.append((t, dur, wait, max(int(f[7]), 0)))
            self._progress(t)
        elif kind == BATCH:
            self.batches += 1
            self._paced(header, kind, line, self.per_batch_s)
        elif kind == BACKWARD:
            self.backwards += 1
            self._paced(header, kind, line, self.per_backward_s)

    def _count_stall(self, dur: float) -> None:
        if len(self.per_step_s) % MEDIAN_EVERY == 1 or not self._median_s:
            self._median_s = self.typical_s
        typical = self._median_s
        if typical > 0 and dur > STALL_RATIO * typical and dur - typical > STALL_MIN_S:
            self.stalls += 1
            self.stall_s += dur - typical

    def _paced(
        self, header: dict[str, Any], kind: str, line: str, gaps: collections.deque[float]
    ) -> None:
        """Progress at a batch or a backward pass, and its gap since the process's previous."""
        t = float(header["t0"]) + int(line.split()[1]) / 1e6
        key = (int(header.get("pid", -1)), kind)
        prev = self.last_at.get(key)
        if prev is not None and t > prev:
            gaps.append(t - prev)
        self.last_at[key] = t
        self._progress(t)

    @property
    def typical_s(self) -> float:
        """The median time a unit of progress takes, in the unit ``progress`` counts; 0 when
        none was timed yet."""
        gaps = (
            self.per_step_s
            if self.steps
            else (self.per_batch_s if self.batches else self.per_backward_s)
        )
        return sorted(gaps)[len(gaps) // 2] if gaps else 0.0

    @property
    def progress(self) -> tuple[int, str]:
        """How far the job got, in the unit the report will count: optimizer steps, else
        DataLoader batches, else backward passes."""
        if self.steps:
            return self.steps, "optimizer step"
        if self.batches:
            return self.batches, "batch"
        return self.backwards, "backward pass"

    def _progress(self, t: float) -> None:
        if self.last_progress is None or t > self.last_progress:
            self.last_progress = t

    def _forget_done(self, now: float) -> None:
        """Drop the windows of processes done stepping (a sweep's finished runs): memory stays
        flat however many processes come and go."""
        for pid in [p for p, w in self.recent.items() if w and w[-1][0] < now - ACTIVE_S]:
            del self.recent[pid]

    def rate(self) -> tuple[float | None, float | None, float | None]:
        """(steps/s, samples/s, data-wait share) over the recent windows of the processes
        stepping now."""
        windows = [w for w in self.recent.values() if len(w) >= 2]
        if not windows:
            return None, None, None
        newest = max(w[-1][0] for w in windows)
        rates, samples, waited, stepped = [], 0.0, 0.0, 0.0
        for w in windows:
            span = w[-1][0] - w[0][0]
            if w[-1][0] < newest - ACTIVE_S or span <= 0:
                continue
            rows = list(w)[1:]
            rates.append(len(rows) / span)
            samples += sum(r[3] for r in rows) / span
            waited += sum(r[2] for r in rows)
            stepped += sum(r[1] for r in rows)
        if not rates:
            return None, None, None
        wait = waited / stepped if stepped > 0 else None
        return sum(rates) / len(rates), (samples if samples else None), wait


class LiveView:
    """Tails the run directory and redraws one status line on a terminal at each call of
    ``draw`` (four times a second from the runner); the steps it shows are those the probe has
    flushed to its event file."""

    def __init__(
        self,
        run_dir: str,
        terminal: TerminalLock | None,
        fd: int,
        judge: LiveJudge | None = None,
    ) -> None:
        self.tail = EventTail(run_dir)
        self.judge = judge  # the findings so far (live.json), judged now and then
        self.stats = LiveStats()
        self.terminal = terminal
        self.fd = fd
        self.latest_sample: dict[str, Any] | None = None
        self.no_probe = False  # no process of the job loaded the probe: no step will come

    def update(self) -> None:
        for header, line in self.tail.poll():
            self.stats.feed(header, line)
        if self.judge is not None:
            self.judge.poll(time.monotonic())

    def close(self) -> None:
        """Stop a judgement still running (the final report follows)."""
        if self.judge is not None:
            self.judge.close()

    def draw(self, elapsed: float, message: str | None = None) -> None:
        term = self.terminal
        if term is None:
            return
        with term.lock:
            if not term.at_line_start:
                return
            try:
                width = os.get_terminal_size(self.fd).columns or 100  # 0: size never set
            except OSError:
                width = 100
            text = self.status_text(elapsed, width - 1, message)
            dim, reset = ("", "") if no_color() else ("\x1b[2m", "\x1b[0m")
            write_all(self.fd, ("\r\x1b[K" + dim + text + reset).encode())
            term.status_shown = True

    @contextlib.contextmanager
    def busy(
        self, message: str, started: float, after_s: float = 0.5, since: float | None = None
    ) -> Iterator[None]:
        """While the block runs, show ``message`` on the status line once ``after_s`` have
        passed since ``since`` (default: the block's start), as ``analysing…`` after the job
        ended; erased when the block ends. ``started`` is the time the clock counts from."""
        delay = after_s if since is None else max(0.0, since + after_s - time.monotonic())
        timer = threading.Timer(delay, lambda: self.draw(time.monotonic() - started, message))
        timer.daemon = True
        if self.terminal is not None:
            timer.start()
        try:
            yield
        finally:
            timer.cancel()
            if timer.is_alive():
                timer.join()
            self.erase()

    def erase(self) -> None:
        if self.terminal is not None:
            with self.terminal.lock:
                self.terminal.clear_status(self.fd)

    def status_fields(self, elapsed: float, message: str | None = None) -> list[tuple[int, str]]:
        """(rank, text) of each field in display order; the lowest rank goes last when the
        line is too narrow."""
        s = self.stats
        if message is not None:
            progress = message
        elif s.steps:
            progress = f"steps {s.steps}"
        elif s.batches:
            progress = f"batches {s.batches}"
        elif s.backwards:
            progress = f"backward passes {s.backwards}"
        elif self.no_probe:
            progress = "no probe: host metrics only"
        else:
            progress = "starting…"
        parts = [(1, f"trainprof {_clock(elapsed)}"), (0, progress)]
        if message is not None:
            return parts
        it_s, samples_s, wait = s.rate()
        if it_s is not None:
            parts.append((2, f"{it_s:.1f} it/s"))
        if samples_s is not None:
            parts.append((4, f"{samples_s:.0f} samples/s"))
        if wait is not None:
            parts.append((3, f"data wait {wait:.0%}"))
        so_far = self.judge.status() if self.judge is not None else None
        if so_far is not None:
            parts.append((2, so_far))
        sample = self.latest_sample
        if sample:
            procs = sample.get("procs") or []
            cpu = sum(p.get("cpu") or 0 for p in procs)
            rss = sum(p.get("rss") or 0 for p in procs)
            parts.append((5, f"CPU {cpu:.0f}%"))
            parts.append((7, f"RSS {fmt_bytes(rss)}"))
            gpu = gpus.row_util(sample)  # None where the row says "unavailable" (a dict)
            if gpu is not None:
                parts.append((6, f"GPU {gpu:.0f}%"))
        return parts

    def status_text(
        self, elapsed: float, width: int | None = None, message: str | None = None
    ) -> str:
        """The fields that fit in ``width``: whole fields are left out, least useful first, so
        a number is never cut in half."""
        parts = self.status_fields(elapsed, message)
        while True:
            text = " · ".join(p for _rank, p in parts)
            if width is None or len(text) <= width or not parts:
                return text
            parts.remove(max(parts, key=lambda p: p[0]))


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"
