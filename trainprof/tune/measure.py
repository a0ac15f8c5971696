"""One trial: the job relaunched with the probe, a candidate's override and an early stop; its rate.

The job runs as `trainprof run` starts it (the probe on its path, its own interpreter), without
py-spy or host sampling: only the probe's step records are read. Its output goes to files in
the trial's run directory. It stops after ``steps`` optimizer steps (the probe's ``--steps``),
or, for the first trial, once ``window_s`` seconds have passed since its first step; the rate
is its steady samples/s (steps/s where no batch size was recorded), warm-up excluded as the
report excludes it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainprof.collect.launcher import probe_env
from trainprof.probe.overrides import APPLIED_FILE, ENV_OVERRIDES


@dataclass(frozen=True)
class Trial:
    """What one run of the job measured, and what its override reached."""

    rate: float | None  # steady samples/s (or steps/s: see ``unit``); None: no steady state
    unit: str  # "samples/s" or "it/s"
    steps: int  # optimizer steps (or batches) the run made
    exit_code: int
    wall_s: float
    applied: dict[str, Any] | None  # the probe's overrides-applied.json; None: never applied
    training_loader: dict[str, Any] | None  # the report's training loader's recorded settings
    error: str | None = None  # why the run gave no rate
    framework: str | None = None  # the framework that called the first optimizer step


def run_trial(
    command: list[str],
    settings: dict[str, Any],
    run_dir: Path,
    steps: int | None,
    window_s: float,
    timeout_s: float,
    base_env: dict[str, str] | None = None,
) -> Trial:
    """Run the job once with ``settings`` applied by the probe; ``steps`` None: stop by time.
    ``base_env``: the job's environment (default: this process's)."""
    run_dir.mkdir(parents=True, exist_ok=False)
    if steps is None:
        env = probe_env(run_dir, 1, base_env, steps_min_s=window_s)
    else:
        env = probe_env(run_dir, steps, base_env)
    env[ENV_OVERRIDES] = json.dumps(settings)
    t0 = time.monotonic()
    with (
        open(run_dir / "job-stdout.txt", "wb") as out,
        open(run_dir / "job-stderr.txt", "wb") as err,
    ):
        proc = subprocess.Popen(
            command,
            env=env,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            code = proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            _end_group(proc.pid)
            proc.wait()
            code = 124
        except BaseException:  # Ctrl-C reaches tune only (the job has its own session)
            _end_group(proc.pid)
            proc.wait()
            raise
    _end_group(proc.pid)
    wall = time.monotonic() - t0
    return read_trial(run_dir, code, wall)


def read_trial(run_dir: Path, exit_code: int, wall_s: float) -> Trial:
    """The trial's rate and facts from its run directory."""
    from trainprof.analysis.frameworks import detect
    from trainprof.analysis.loaders import training_loader_key
    from trainprof.analysis.metrics import warmup_steps
    from trainprof.compare.windows import step_windows
    from trainprof.store.session import Session

    applied = _read_json(run_dir / APPLIED_FILE)
    session = Session.load(run_dir)
    primary = session.primary
    n = 0
    loader, framework = None, None
    if primary is not None:
        framework = detect([], primary.infos)
        n = primary.n_steps or len(primary.batches["t"]) or len(primary.backwards)
        if primary.loaders:
            loader = primary.loaders.get(training_loader_key(primary))
    windows = step_windows(session, warmup_steps(n), 1)
    rate, unit = None, "samples/s"
    if windows:
        w = windows[0]
        rate, unit = (w.samples_per_s, "samples/s") if w.samples_per_s else (w.steps_per_s, "it/s")
    error = None
    if rate is None:
        error = _why_no_rate(run_dir, exit_code, n)
    return Trial(rate, unit, n, exit_code, wall_s, applied, loader, error, framework)


def _why_no_rate(run_dir: Path, exit_code: int, steps: int) -> str:
    if exit_code == 124:
        return "the run passed its time limit"
    if exit_code != 0:
        tail = _last_line(run_dir / "job-stderr.txt")
        return f"the job exited with code {exit_code}" + (f": {tail}" if tail else "")
    return f"too few steps for a steady state ({steps})"


def _last_line(path: Path) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1][:200] if lines else ""


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _end_group(pgid: int) -> None:
    """DataLoader workers the job left behind (a killed job's) do not outlive the trial."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
