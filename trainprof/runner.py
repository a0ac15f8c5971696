"""A live run: launcher + samplers + live view, until the job ends; then analysis and report."""

from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from trainprof.analysis.pipeline import analyze
from trainprof.launcher import Job, exit_code_of, probe_env, resolve_command
from trainprof.live import LiveView
from trainprof.output import TerminalLock
from trainprof.render import console as console_render
from trainprof.render.json_report import report_dict
from trainprof.samplers.hang import HANG_STACKS, dump_stacks
from trainprof.samplers.loop import DEFAULT_INTERVAL_S, SamplerLoop
from trainprof.samplers.stacks import StackRecorder
from trainprof.store import rundir
from trainprof.store.session import Session

TIMEOUT_EXIT = 124  # as GNU timeout


@dataclass(frozen=True)
class RunOptions:
    command: list[str]
    run_dir: Path | None = None
    json_path: Path | None = None
    steps: int | None = None
    timeout_s: float | None = None
    interval_s: float | None = None  # None: 0.5 s, widening to 2 s after ten minutes
    quiet: bool = False
    verbose: bool = False
    stacks: bool = True
    on_hang: str | None = None  # "report" | "kill"; None: kill with --timeout, else report
    hang_after_s: float | None = None  # None: max(10 s, 20 median steps)


def usable_cpus() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def run(opts: RunOptions) -> int:
    command = resolve_command(opts.command)
    explicit = opts.run_dir is not None
    run_dir = rundir.create(opts.run_dir or rundir.default_run_dir(command), explicit)
    meta: dict[str, Any] = {
        "command": command,
        "cwd": os.getcwd(),
        "run_dir": str(run_dir),
        "usable_cpus": usable_cpus(),
        "interval_s": opts.interval_s,
        "max_steps": opts.steps,
        "timeout_s": opts.timeout_s,
        "wall_start": time.time(),
    }
    interactive = sys.stderr.isatty() and not opts.quiet
    terminal = TerminalLock() if interactive else None
    job = Job(command, probe_env(run_dir, opts.steps), run_dir, terminal)
    job.start()
    meta["t_launch"] = job.started_at
    meta["pid"] = job.pid
    rundir.write_json(run_dir / rundir.META, meta)
    sampler = SamplerLoop(
        job.pid,
        run_dir / rundir.SAMPLES,
        opts.interval_s or DEFAULT_INTERVAL_S,
        adaptive=opts.interval_s is None,
    )
    sampler.start()
    live = LiveView(str(run_dir), terminal, sys.stderr.fileno())
    stacks = _StackStarter(run_dir, job, command) if opts.stacks else None
    watch = HangWatch(opts, run_dir)
    stopped_by = _supervise(job, live, sampler, opts, stacks, watch)
    if watch.hang is not None:
        meta["hang"] = watch.hang
    live.erase()
    sampler.stop()
    job.finish()
    if stacks is not None:
        meta["stacks"] = stacks.finish()
    assert job.proc is not None and job.proc.returncode is not None
    rc = job.proc.returncode
    meta.update(
        exit_code=exit_code_of(rc),
        signal=signal.Signals(-rc).name if rc < 0 else None,
        wall_s=time.monotonic() - job.started_at,
        forwarded=job.forwarded,
        samples=sampler.count,
        output={
            "stdout_bytes": job.pumps[0].total_bytes,
            "stdout_lines": job.pumps[0].total_lines,
            "stderr_bytes": job.pumps[1].total_bytes,
            "stderr_lines": job.pumps[1].total_lines,
        },
    )
    rundir.write_json(run_dir / rundir.META, meta)
    session = Session.load(run_dir)
    meta["stopped_by"] = stopped_by or _stop_reason(session)
    session.meta = meta
    rundir.write_json(run_dir / rundir.META, meta)
    report(session, opts.json_path, verbose=opts.verbose)
    if stopped_by in ("timeout", "hang"):
        return TIMEOUT_EXIT
    return exit_code_of(rc)


class _StackStarter:
    """Starts py-spy on the job's main Python process: at once for a script, or, for any other
    command (a shell wrapper, torchrun), once the process that trains records its first step."""

    def __init__(self, run_dir: Path, job: Job, command: list[str]) -> None:
        self.run_dir = run_dir
        self.recorder: StackRecorder | None = None
        if command[0] == sys.executable:
            self._start(job.pid)

    def poll(self, live: LiveView) -> None:
        if self.recorder is not None:
            self.recorder.poll()
            return
        # The process that trains: the first to record a step or batch (rank 0 under torchrun;
        # never a launcher such as torchrun's agent, which imports torch but does not train).
        for pid, header in live.stats.stepping.items():
            if header.get("rank") in (None, 0):
                self._start(pid)
                return

    def _start(self, pid: int) -> None:
        self.recorder = StackRecorder(pid, self.run_dir)
        self.recorder.start()

    def finish(self) -> dict[str, Any]:
        rec = self.recorder
        if rec is None:
            return {"error": "no Python main process with the probe was found"}
        rec.stop()
        return {"chunks": rec.chunks, "pid": rec.pid, "error": rec.error}


class HangWatch:
    """Notices when the job stops making progress, and keeps the stacks that show where.

    Armed only once the job has made an optimizer step (or, with no optimizer, a few batches):
    before it, compiling, a first CUDA context, cudnn autotuning or a first-epoch cache fill
    are progress, and only --timeout bounds them. A silence whose stacks show torch.compile
    compiling (a recompile) is progress too: the watch looks again one silence later."""

    MIN_SILENCE_S = 10.0
    STEP_MULTIPLE = 20.0
    ARM_AFTER_BATCHES = 3  # a job that never steps an optimizer: its first batches warm up

    def __init__(self, opts: RunOptions, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.after = opts.hang_after_s
        self.action = opts.on_hang or ("kill" if opts.timeout_s else "report")
        self.hang: dict[str, Any] | None = None
        self.compiling_until: float | None = None
        self.compiling_seen = 0

    def check(self, job: Job, live: LiveView, now: float) -> bool:
        """True when a hang was just detected and the job should be stopped."""
        stats = live.stats
        if self.hang is not None or stats.last_progress is None:
            return False
        if stats.steps == 0 and stats.batches < self.ARM_AFTER_BATCHES:
            return False
        if self.compiling_until is not None and now < self.compiling_until:
            return False
        limit = self.after
        if limit is None:
            typical = (
                sorted(stats.per_step_s)[len(stats.per_step_s) // 2] if stats.per_step_s else 0.0
            )
            limit = max(self.MIN_SILENCE_S, self.STEP_MULTIPLE * typical)
        silent = now - stats.last_progress
        if silent <= limit:
            return False
        progress = stats.steps or stats.batches
        info = dump_stacks(job.pid, self.run_dir)
        if info.get("compiling"):
            self.compiling_until = now + limit
            self.compiling_seen += 1
            return False
        info.update(silent_s=round(silent, 2), steps_before=progress, unit=_unit(stats))
        self.hang = info
        print(
            f"\ntrainprof: no progress for {silent:.0f} s after {progress} {_unit(stats)}s; "
            f"stacks saved to {self.run_dir / HANG_STACKS}"
            + ("; stopping the job (--on-hang kill)" if self.action == "kill" else ""),
            file=sys.stderr,
        )
        return self.action == "kill"

    def record(self, job: Job, silent: float, steps_before: int) -> None:
        info = dump_stacks(job.pid, self.run_dir)
        info.update(silent_s=round(silent, 2), steps_before=steps_before, unit="step")
        self.hang = info


def _unit(stats: Any) -> str:
    return "optimizer step" if stats.steps else "batch"


def _supervise(
    job: Job,
    live: LiveView,
    sampler: SamplerLoop,
    opts: RunOptions,
    stacks: _StackStarter | None,
    watch: HangWatch,
) -> str | None:
    """Wait for the job, forwarding signals, drawing the status line, enforcing --timeout."""
    stopped_by: list[str] = []

    def forward(signum: int, _frame: Any) -> None:
        """First signal: pass it on. A second one: the user means it, kill the job's group."""
        if stopped_by:
            job.send(signal.SIGKILL)
            return
        stopped_by.append("interrupt")
        job.send(signum)

    previous = {
        s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    }
    try:
        deadline = job.started_at + opts.timeout_s if opts.timeout_s else None
        while job.poll(timeout=0.25) is None:
            now = time.monotonic()
            try:
                live.latest_sample = sampler.latest
                live.update()
                live.draw(now - job.started_at)
                if stacks is not None:
                    stacks.poll(live)
                hung = watch.check(job, live, now)
            except Exception as exc:  # never lose the job over a display or watch error
                _warn_once(f"trainprof: live view disabled after an internal error: {exc!r}")
                hung = False
            if hung and not stopped_by:
                stopped_by[:] = ["hang"]
                _stop(job)
            elif deadline is not None and now > deadline and not stopped_by:
                if watch.hang is None and live.stats.steps == 0:
                    watch.record(job, now - job.started_at, 0)  # no first step within --timeout
                stopped_by[:] = ["timeout"]
                _stop(job)
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    return stopped_by[0] if stopped_by else None


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        print(message, file=sys.stderr)


def _stop(job: Job) -> None:
    """Stop a job trainprof gave up on: SIGTERM to its group, then SIGKILL after a grace period."""
    job.send(signal.SIGTERM)
    if job.poll(timeout=3) is None:
        job.send(signal.SIGKILL)
        job.poll(timeout=5)


def _stop_reason(session: Session) -> str | None:
    for p in session.processes:
        for info in p.infos:
            if info.get("stop") == "steps":
                return "steps"
    return None


def report(session: Session, json_path: Path | None, verbose: bool = False) -> dict[str, Any]:
    """Analyse a loaded run, store report.json in its directory, print the console report."""
    metrics, verdict = analyze(session)
    data = report_dict(session.meta, metrics, verdict)
    rundir.write_json(Path(session.run_dir) / rundir.REPORT, data)
    if json_path is not None:
        try:
            write_user_json(json_path, data)
        except OSError as exc:  # the run directory still holds report.json: nothing is lost
            print(f"trainprof: could not write --json {json_path}: {exc.strerror}", file=sys.stderr)
    console_render.render(Console(stderr=True), session.meta, metrics, verdict, verbose=verbose)
    return data


def write_user_json(path: Path, data: dict[str, Any]) -> None:
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
