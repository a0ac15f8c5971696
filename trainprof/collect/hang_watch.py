"""The hang watch: notices when the job stops making progress, looks whether it is at work,
and keeps the stacks that show where it hung."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainprof.collect.launcher import (
    Job,
)
from trainprof.collect.live import LiveStats, LiveView
from trainprof.collect.recording import Recording
from trainprof.collect.samplers import at_work
from trainprof.collect.samplers import progress as progress_page
from trainprof.collect.samplers.hang import HANG_STACKS, dump_stacks
from trainprof.collect.samplers.progress import ProgressPage
from trainprof.collect.samplers.suspended import Suspensions
from trainprof.collect.say import say
from trainprof.limits import HANG_SILENCE_S, HANG_STEP_MULTIPLE
from trainprof.units import plural

if TYPE_CHECKING:
    from trainprof.collect.runner import RunOptions


class HangWatch:
    """Notices when the job stops making progress, and keeps the stacks that show where.

    Armed only once the job has made an optimizer step (or, with no optimizer, a few batches;
    with neither an optimizer nor a DataLoader, a few backward passes):
    before it, compiling, a first CUDA context, cudnn autotuning or a first-epoch cache fill
    are progress, and only --timeout bounds them. A silence whose stacks show torch.compile
    compiling (a recompile) is progress too, and so is a silence at work (a final evaluation, a
    checkpoint written: its stack moves or it reads or writes, samplers/at_work.py): the watch
    looks again one silence later."""

    MIN_SILENCE_S = HANG_SILENCE_S
    STEP_MULTIPLE = HANG_STEP_MULTIPLE
    RECORDED_LAG_S = 2.0  # a probe's records reach its file this late (its flush timer)
    ARM_AFTER_BATCHES = 3  # a job that never steps an optimizer: its first batches (or backward
    # passes) warm up

    def __init__(self, opts: RunOptions, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.after = opts.hang_after_s
        self.action = opts.on_hang or ("kill" if opts.timeout_s else "report")
        self.hang: dict[str, Any] | None = None
        self.look_again_at: float | None = None  # compiling, or at work: not before then
        self.suspect: dict[str, Any] | None = None  # the stacks of a silence being looked at
        self.looks: list[at_work.Look] = []
        # the latest silence found at work: its stacks, why, and its last progress
        self.at_work: dict[str, Any] | None = None
        self.redact = not opts.no_redact
        self.recording: Recording | None = None  # whether the run directory still records
        self.page = ProgressPage(run_dir)  # the steps made since recording stopped
        self.unrecorded = progress_page.NOTHING
        self.stood_down: dict[str, Any] | None = None  # recording stopped and took its view
        self.suspensions = Suspensions(time.monotonic())  # the job stopped by a signal

    def last_progress(self, stats: LiveStats) -> float | None:
        """The latest step, batch or backward pass: recorded, or counted once recording stopped."""
        last, counted = stats.last_progress, self.unrecorded.last_t
        if counted is not None and (last is None or counted > last):
            return counted
        return last

    def check(self, job: Job, live: LiveView, now: float) -> bool:
        """True when a hang was just detected and the job should be stopped."""
        stats = live.stats
        if self._suspended(job, live, now) or self.hang is not None or self.stood_down:
            return False
        self.unrecorded = self.page.read()
        last = self.last_progress(stats)
        if last is None:
            return False
        steps = stats.steps + self.unrecorded.steps
        made = stats.progress[0] + self.unrecorded.total()
        if made < (1 if steps else self.ARM_AFTER_BATCHES):
            return False
        if self.look_again_at is not None and now < self.look_again_at:
            return False
        limit = self.after
        if limit is None:
            limit = max(self.MIN_SILENCE_S, self.STEP_MULTIPLE * stats.typical_s)
        resumed = self.suspensions.last_end  # a stopped job's silence counts from its SIGCONT
        silent = now - (last if resumed is None else max(last, resumed))
        if silent <= limit:
            self.suspect, self.looks = None, []
            return False
        if self._stand_down(last, now):
            return False
        if self.suspect is None:
            info = dump_stacks(job.pid, self.run_dir, self.redact)
            if info.get("compiling"):
                self.look_again_at = now + limit
                return False
            self.suspect = info
        # a few looks over LOOK_FOR_S tell a silence at work from a hang
        self.looks.append(at_work.look(job.pid, stats.stepping, now))
        if now - self.looks[0].t < at_work.LOOK_FOR_S:
            return False
        info, why = self.suspect, at_work.why_at_work(self.looks)
        self.suspect, self.looks = None, []
        progress, unit = stats.progress
        progress += self.unrecorded.total()
        if why is not None:
            self.look_again_at = now + limit
            said = self.at_work is not None and self.at_work["since"] == last
            self.at_work = {
                **info,
                "at_work": why,
                "since": last,
                "steps_before": progress,
                "unit": unit,
            }
            if not said:
                print(
                    f"\ntrainprof: no progress for {silent:.0f} s, but the job is at work ({why}):"
                    " not a hang; looking again later",
                    file=sys.stderr,
                )
            return False
        info.update(silent_s=round(silent, 2), steps_before=progress, unit=unit)
        self.hang = info
        print(
            f"\ntrainprof: no progress for {silent:.0f} s after {plural(progress, unit)}; "
            f"stacks saved to {_shown_path(self.run_dir / HANG_STACKS)}"
            + ("; stopping the job (--on-hang kill)" if self.action == "kill" else ""),
            file=sys.stderr,
        )
        return self.action == "kill"

    def stopped_at_work(self, stats: LiveStats, now: float) -> dict[str, Any] | None:
        """The silence found at work, where the job was stopped (by --timeout, a Ctrl-C) still
        in it: what the report tells instead of a hang (where it was, and that it moved)."""
        if self.at_work is None or self.at_work["since"] != self.last_progress(stats):
            return None
        info = {k: v for k, v in self.at_work.items() if k != "since"}
        return dict(info, silent_s=round(now - self.at_work["since"], 2))

    def _suspended(self, job: Job, live: LiveView, now: float) -> bool:
        """Whether the job is stopped by a signal now; said once it is continued."""
        pids = {job.pid, *live.stats.stepping}
        span = self.suspensions.update(pids, now)
        if self.suspensions.stopped:
            self.suspect, self.looks = None, []
            return True
        if span is not None:
            say(
                live,
                f"trainprof: the job was stopped by a signal for {span[1] - span[0]:.0f} s "
                "(SIGSTOP, or Ctrl-Z's SIGTSTP) and continued: not a hang, and not counted as one",
            )
        return False

    def _stand_down(self, last: float, now: float) -> bool:
        """Recording stopped and no probe counts steps since (``probe/progress.py``): the
        silence is of trainprof's own making, so the watch stands down rather than stop a job
        it no longer sees. A silence that began well before recording stopped is the job's."""
        rec = self.recording
        if rec is None or rec.when is None or self.unrecorded.last_t is not None:
            return False
        when = rec.when
        if not rec.blinds_the_watch():  # the probes still record: the silence is the job's
            return False
        if last < when - self.RECORDED_LAG_S:
            return False
        self.stood_down = {"at_s": round(now - self.suspensions.started_at, 2)}
        print(
            "\ntrainprof: recording stopped, and the job's steps are no longer seen: the hang "
            "watch stands down (it cannot tell a hang from a job it does not see)",
            file=sys.stderr,
        )
        return True

    def record(self, job: Job, silent: float, steps_before: int) -> None:
        info = dump_stacks(job.pid, self.run_dir, self.redact)
        info.update(silent_s=round(silent, 2), steps_before=steps_before, unit="step")
        self.hang = info


def _shown_path(path: Path) -> str:
    """A path under the current directory, relative (as the report shows the run directory)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)
