"""Runs the baseline and each candidate in alternation until each is told apart or the budget ends.

A round runs the job's own settings, then every candidate not yet decided (in reverse order
every other round, so that a drift of the machine's load does not favour one end). A candidate is
decided once both it and the baseline have ``MIN_RUNS`` rates and their ranges do not overlap
(faster or slower), or once it has ``MAX_RUNS`` rates whose range meets the baseline's (within
noise). A run is started only when the budget holds one more run of the mean length so far.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainprof.errors import TrainprofError
from trainprof.tune.candidates import BASELINE, Candidate, JobSettings, candidates
from trainprof.tune.measure import Trial, run_trial

# Three runs a side: two runs of each of two settings part by chance once in three times
# (1/6 faster, 1/6 slower) where nothing differs; three runs each, once in ten.
MIN_RUNS = 3
MAX_RUNS = 5
SLOW_RUN = 3.0  # a candidate's run stopped at this many times the first run's length: slower
FASTER, SLOWER, NOISE = "faster", "slower", "within noise"
UNDECIDED = "undecided"  # fewer than MIN_RUNS runs a side when the budget ended
NOT_APPLIED = "not applied"
FAILED = "failed"


@dataclass
class Arm:
    """A candidate and the rates its runs measured."""

    candidate: Candidate
    rates: list[float] = field(default_factory=list)
    problem: str | None = None  # not applied, or failed: why it has no verdict
    problem_kind: str | None = None

    @property
    def median(self) -> float | None:
        return statistics.median(self.rates) if self.rates else None


@dataclass(frozen=True)
class Verdict:
    """A candidate against the baseline: its change in rate, with its spread, and the verdict."""

    verdict: str
    change: float | None  # median / baseline median - 1
    spread: float | None  # ± on ``change``: the two ranges' half-widths over the baseline median


@dataclass
class Search:
    """The whole measurement: the baseline, the candidates, their runs."""

    command: list[str]
    usable_cpus: int
    steps: int = 0
    unit: str = "samples/s"
    job: JobSettings | None = None
    baseline: Arm = field(default_factory=lambda: Arm(BASELINE))
    arms: list[Arm] = field(default_factory=list)
    runs: int = 0
    spent_s: float = 0.0
    note: str | None = None  # why nothing was tried, where nothing was
    framework: str | None = None  # the framework that runs the loop (its own words for a setting)
    ceilings: list[Ceiling] = field(default_factory=list)  # measured last, where time was left

    def verdict(self, arm: Arm) -> Verdict:
        """Faster or slower where the ranges do not overlap with enough runs on both sides."""
        if arm.problem is not None:
            return Verdict(arm.problem_kind or FAILED, None, None)
        base, mine = self.baseline.rates, arm.rates
        if not base or not mine:
            return Verdict(UNDECIDED, None, None)
        b = statistics.median(base)
        change = statistics.median(mine) / b - 1
        spread = ((max(mine) - min(mine)) + (max(base) - min(base))) / 2 / b
        if len(base) < MIN_RUNS or len(mine) < MIN_RUNS:
            return Verdict(UNDECIDED, change, None)
        if min(mine) > max(base):
            return Verdict(FASTER, change, spread)
        if max(mine) < min(base):
            return Verdict(SLOWER, change, spread)
        return Verdict(NOISE, change, spread)

    def decided(self, arm: Arm) -> bool:
        v = self.verdict(arm)
        if v.verdict in (FASTER, SLOWER, NOT_APPLIED, FAILED):
            return True
        return v.verdict == NOISE and len(arm.rates) >= MAX_RUNS

    def best(self) -> Arm | None:
        """The fastest candidate measured faster than the baseline; None: nothing to gain."""
        faster = [a for a in self.arms if self.verdict(a).verdict == FASTER]
        return max(faster, key=lambda a: a.median or 0.0, default=None)


@dataclass(frozen=True)
class Ceiling:
    """What one side could give were the other free: one run with the job's own settings."""

    name: str  # "step" (input made free) or "input" (the input pipeline alone)
    rate: float | None  # None: not measured, see ``problem``
    problem: str | None = None


Progress = Callable[[str, float], None]  # (what runs now, the budget's share spent)


def tune(
    command: list[str],
    usable_cpus: int,
    budget_s: float,
    window_s: float,
    progress: Progress,
    work_dir: Path | None = None,
    only: list[Candidate] | None = None,
) -> Search:
    """Measure the job's own settings, then alternate candidates with them within ``budget_s``."""
    root = Path(tempfile.mkdtemp(prefix="trainprof-tune-", dir=work_dir))
    try:
        return _search(command, usable_cpus, budget_s, window_s, progress, root, only)
    finally:
        shutil.rmtree(root, ignore_errors=True)  # the runs' records: their rates are kept


def _search(
    command: list[str],
    usable_cpus: int,
    budget_s: float,
    window_s: float,
    progress: Progress,
    root: Path,
    only: list[Candidate] | None,
) -> Search:
    start = time.monotonic()
    search = Search(command, usable_cpus)

    def left() -> float:
        return budget_s - (time.monotonic() - start)

    longest = max(60.0, budget_s)  # a run's time limit: see SLOW_RUN once the first is in

    def trial(what: str, settings: dict[str, Any], steps: int | None) -> Trial:
        progress(what, 1 - max(0.0, left()) / budget_s)
        search.runs += 1
        run_dir = root / f"run-{search.runs:03d}"
        limit = min(longest, max(60.0, left() + 30.0))
        return run_trial(command, settings, run_dir, steps, window_s, limit)

    def one(arm: Arm, steps: int | None) -> Trial:
        t = trial(f"{arm.candidate.name} (run {len(arm.rates) + 1})", arm.candidate.settings, steps)
        if t.rate is not None:
            arm.rates.append(t.rate)
        return t

    first = one(search.baseline, None)
    if first.rate is None:
        raise TrainprofError(f"the job gave no steady rate to compare with: {first.error}", 3)
    search.steps, search.unit = first.steps, first.unit
    longest = max(30.0, SLOW_RUN * first.wall_s)
    search.job = _job_settings(first)
    search.framework = first.framework
    if search.job is None:
        search.note = "the probe recorded none of the job's settings: nothing to try"
    else:
        if search.job.num_workers is None:
            search.note = (
                "no training DataLoader was iterated with gradients on: only threads were tried"
            )
        chosen = only if only is not None else candidates(search.job, usable_cpus)
        search.arms = [Arm(c) for c in chosen]
    round_no = 0
    while search.arms:
        open_arms = [a for a in search.arms if not search.decided(a)]
        if not open_arms:
            break
        order = open_arms if round_no % 2 == 0 else open_arms[::-1]
        if round_no > 0:
            order = [search.baseline, *order]
        for arm in order:
            mean = (time.monotonic() - start) / search.runs
            if left() < mean:
                search.spent_s = time.monotonic() - start
                return search
            t = one(arm, search.steps)
            if arm is not search.baseline:
                _check_trial(arm, t, first.wall_s)
        round_no += 1
    loader = search.job is not None and search.job.num_workers is not None
    for name in CEILINGS if loader else ():  # both are the training loader's
        if left() < (time.monotonic() - start) / search.runs:
            break
        settings = {"ceiling": name, "window_s": window_s}
        t = trial(f"ceiling: {CEILING_NAMES[name]}", settings, search.steps)
        search.ceilings.append(_ceiling(name, t))
    search.spent_s = time.monotonic() - start
    return search


CEILINGS = ("step", "input")
CEILING_NAMES = {
    "step": "the loop with its input made free (its first batches replayed)",
    "input": "the input pipeline alone (the training loader with no step)",
}


def _ceiling(name: str, trial: Trial) -> Ceiling:
    if name == "input":
        alone = (trial.applied or {}).get("input_alone")
        if isinstance(alone, dict) and alone.get("seconds") and alone.get("samples"):
            return Ceiling(name, float(alone["samples"]) / float(alone["seconds"]))
        return Ceiling(name, None, trial.error or "no samples counted")
    if not (trial.applied or {}).get("replayed"):
        return Ceiling(name, None, "the training loader was not replayed")
    return Ceiling(name, trial.rate, trial.error)


def _job_settings(trial: Trial) -> JobSettings | None:
    """The job's own settings, from the baseline's (empty) override record: its training
    loader's as its first pass started; a job without one, its threads as it ended (no loader
    settings to try); None where the probe recorded neither."""
    applied = trial.applied or {}
    before = applied.get("before")
    threads = applied.get("threads_job", applied.get("threads_at_exit"))
    if not isinstance(threads, int):
        return None
    if not isinstance(before, dict):
        return JobSettings(num_workers=None, persistent_workers=False, threads=threads)
    workers = before.get("num_workers")
    return JobSettings(
        num_workers=workers if isinstance(workers, int) else 0,
        persistent_workers=before.get("persistent_workers") is True,
        threads=threads,
    )


def _check_trial(arm: Arm, trial: Trial, baseline_wall_s: float) -> None:
    """A candidate whose run failed, or whose settings the training loader did not get, is
    dropped with the reason: its rate is not the candidate's. One whose run was stopped at
    ``SLOW_RUN`` times the first run's length is slower, without a rate."""
    if trial.exit_code == 124:
        arm.problem = (
            f"its run was stopped after {trial.wall_s:.0f} s, {SLOW_RUN:.0f}× the job's own "
            f"({baseline_wall_s:.0f} s)"
        )
        arm.problem_kind = SLOWER
        arm.rates.clear()
        return
    if trial.rate is None:
        arm.problem, arm.problem_kind = trial.error or "no rate", FAILED
        return
    want: dict[str, Any] = arm.candidate.settings
    applied = trial.applied or {}
    after = applied.get("after") if isinstance(applied.get("after"), dict) else None
    loader = trial.training_loader or {}
    if "num_workers" in want and (
        after is None or loader.get("num_workers") != want["num_workers"]
    ):
        arm.problem = "the training loader did not get the settings"
        arm.problem_kind = NOT_APPLIED
    elif "threads" in want and applied.get("threads") != want["threads"]:
        arm.problem = "torch's threads were not set"
        arm.problem_kind = NOT_APPLIED
    if arm.problem is not None:
        arm.rates.clear()
