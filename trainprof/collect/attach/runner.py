"""A live attach: py-spy and the host/GPU sampler on a running job for ``--duration`` seconds
(or until Ctrl-C, or until the job exits), a status line meanwhile, then the report from the
run directory it wrote, through the same analysis and renderers as `trainprof run`."""

from __future__ import annotations

import math
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from trainprof import signals
from trainprof.collect.attach import DEFAULT_DURATION_S, DEFAULT_RATE_HZ, access, record
from trainprof.collect.attach.target import Process, Targets, resolve
from trainprof.collect.live import LiveView
from trainprof.collect.output import TerminalLock
from trainprof.collect.samplers.at_work import io_bytes
from trainprof.collect.samplers.hang import dump_one
from trainprof.collect.samplers.loop import SamplerLoop
from trainprof.collect.samplers.proctree import process_tree
from trainprof.collect.samplers.pyspy import py_spy_path
from trainprof.collect.watchdog import Watchdog
from trainprof.doctor.cpu import usable_cpu_count
from trainprof.errors import TrainprofError
from trainprof.render import console as console_render
from trainprof.render.text import make_console
from trainprof.store import rundir
from trainprof.store.redact import configure as redact_config
from trainprof.store.redact import redact
from trainprof.store.session import Session
from trainprof.version import __version__

MAX_RATE_HZ = 1000
SAMPLE_INTERVAL_S = 0.5
EXIT_GRACE_S = 2.0  # py-spy stopped early: how long a target may take to finish exiting
# py-spy stopped by itself on a live target: started again this many times at most, while at
# least MIN_SEGMENT_S are left (a recording shorter than that shows no rhythm)
MAX_RESTARTS = 5
MIN_SEGMENT_S = 1.0


@dataclass(frozen=True)
class AttachOptions:
    pid: int
    duration_s: float = DEFAULT_DURATION_S
    rate_hz: int = DEFAULT_RATE_HZ
    json_path: Path | None = None
    run_dir: Path | None = None
    quiet: bool = False
    verbose: bool = False
    launcher: bool = False  # --launcher: the PID launched the job (a shell script, an init)


class _Status(LiveView):
    """The run's status line, with "attached" progress instead of steps from a probe."""

    progress = ""

    def status_fields(self, elapsed: float, message: str | None = None) -> list[tuple[int, str]]:
        fields = super().status_fields(elapsed, message)
        if message is None:
            fields[1] = (0, self.progress)
        return fields


def _check(opts: AttachOptions) -> None:
    if not (math.isfinite(opts.duration_s) and opts.duration_s > 0):
        raise TrainprofError(f"--duration must be more than 0 seconds (got {opts.duration_s:g})")
    if not 1 <= opts.rate_hz <= MAX_RATE_HZ:
        raise TrainprofError(f"--rate must be 1..{MAX_RATE_HZ} Hz (got {opts.rate_hz})")
    if opts.json_path is not None:
        rundir.check_user_file(opts.json_path)


def _dump(pid: int) -> str:
    """One py-spy dump (attach's resolve asks it of a process that may launch trainers)."""
    exe = py_spy_path()
    return dump_one(exe, pid) if exe else ""


def _environs(targets: Targets) -> list[dict[str, str]]:
    """The environments of the processes attached to, where they can be read."""
    out = []
    for t in targets.processes:
        try:
            out.append(psutil.Process(t.pid).environ())
        except (psutil.Error, OSError):
            pass
    return out


def attach(opts: AttachOptions) -> int:
    _check(opts)
    targets = resolve(opts.pid, dump=_dump, launcher=opts.launcher)
    if targets.note:
        print(f"trainprof: {targets.note}", file=sys.stderr)
    for t in targets.processes:
        access.check(t.pid)
    # the job's secrets, which this shell may not have: masked in all attach writes and prints
    commands = [arg for t in targets.processes for arg in t.command]
    redact_config(True, commands, _environs(targets))
    main = targets.processes[0]
    shown = redact(list(main.command))
    explicit = opts.run_dir is not None
    default = rundir.default_run_dir(shown or ["job"])  # <UTC stamp>-<script>
    default = default.with_name(f"{default.name[:16]}attach-{default.name[16:]}")
    run_dir = rundir.create(opts.run_dir or default, explicit)
    meta: dict[str, Any] = {
        "trainprof_version": __version__,
        "command": shown,
        "redacted": True,
        "cwd": main.cwd or os.getcwd(),
        "run_dir": str(run_dir),
        "usable_cpus": usable_cpu_count(main.pid),  # the job's, not attach's
        "cpu_count": os.cpu_count(),
        "interval_s": SAMPLE_INTERVAL_S,
        "wall_start": time.time(),
        "pid": main.pid,
        "attach": {
            "pid": main.pid,
            "given_pid": targets.given,
            "note": targets.note,
            "rate_hz": opts.rate_hz,
            "duration_s": opts.duration_s,
            "targets": [
                {"pid": t.pid, "rank": t.rank, "command": redact(list(t.command))}
                for t in targets.processes
            ],
        },
    }
    rundir.write_json(run_dir / rundir.META, meta)
    sampled, stopped_by = _sample(opts, targets, run_dir, meta)
    meta.update(sampled)
    meta["stopped_by"] = stopped_by
    rundir.write_json(run_dir / rundir.META, meta)
    from trainprof.report import report

    session = Session.load(run_dir)
    console = make_console(stderr=True)
    report(session, opts.json_path, verbose=opts.verbose, console=console)
    hint = console_render.rerender_hint(meta)
    if hint is not None:
        console.print(hint)
    return 0


def _sample(
    opts: AttachOptions, targets: Targets, run_dir: Path, meta: dict[str, Any]
) -> tuple[dict[str, Any], str | None]:
    """Sample until the duration ends, Ctrl-C, or every target exits; write the traces."""
    root = targets.given if len(targets.processes) > 1 else targets.processes[0].pid
    sampler = SamplerLoop(root, run_dir / rundir.SAMPLES, SAMPLE_INTERVAL_S, adaptive=False)
    started = time.monotonic()
    meta["t_launch"] = started
    sampler.start()
    # the job's reads and writes over the window: a job whose stacks keep still but that reads
    # or writes is at work (a long download or save), not hung (analysis/stillness.py)
    io_at_start = io_bytes(process_tree(root))
    spies = [
        record.TreeRecorder(t.pid, run_dir, opts.rate_hz, opts.duration_s)
        for t in targets.processes
    ]
    guard = Watchdog()  # should trainprof die (kill -9), py-spy stops with it
    guard.start()
    for spy in spies:
        if spy.start():
            guard.watch(spy.pid_of_run(), signal.SIGINT)  # SIGINT: it writes what it recorded
    interrupted: list[int] = []

    def on_signal(signum: int, _frame: Any) -> None:
        interrupted.append(signum)

    previous = signals.catch((signal.SIGINT, signal.SIGTERM), on_signal)
    interactive = sys.stderr.isatty() and not opts.quiet
    status = _Status(str(run_dir), TerminalLock() if interactive else None, sys.stderr.fileno())
    exited: dict[int, float] = {}
    try:
        while not interrupted:
            now = time.monotonic()
            for t in targets.processes:
                if t.pid not in exited and not t.is_running():
                    exited[t.pid] = now - started
            if now - started >= opts.duration_s or len(exited) == len(targets.processes):
                break
            for spy, t in zip(spies, targets.processes, strict=True):
                left = opts.duration_s - (now - started)
                if (
                    spy.ended_by_itself()
                    and len(spy.segments) <= MAX_RESTARTS
                    and left >= MIN_SEGMENT_S
                    and _lives_on(t)
                ):
                    guard.forget(spy.pid_of_run())
                    if spy.start(left):
                        guard.watch(spy.pid_of_run(), signal.SIGINT)
            if not any(spy.running() for spy in spies):
                break
            status.latest_sample = sampler.latest
            status.progress = (
                f"attached to pid {targets.processes[0].pid}: {now - started:.0f}/"
                f"{opts.duration_s:g} s"
            )
            status.draw(now - started)
            time.sleep(0.2)
        status.erase()
        meta["attach"]["io_bytes"] = [io_at_start, io_bytes(process_tree(root))]
        # py-spy ends with its target and may notice first, while the target is still
        # exiting: give it a moment to be gone
        ended_early = not interrupted and not any(spy.running() for spy in spies)
        wait_until = time.monotonic() + (EXIT_GRACE_S if ended_early else 0.0)
        while True:
            for t in targets.processes:
                if t.pid not in exited and not t.is_running():
                    exited[t.pid] = time.monotonic() - started
            if len(exited) == len(targets.processes) or time.monotonic() >= wait_until:
                break
            time.sleep(0.05)
        for spy in spies:
            spy.stop()
    finally:
        signals.restore(previous)
        sampler.stop()
        guard.done()
    wall = time.monotonic() - started
    if interrupted:
        meta["stop_signal"] = signal.Signals(interrupted[0]).name  # a Ctrl-C is SIGINT
    return _collect(spies, targets, run_dir, meta, exited, wall), (
        "interrupt" if interrupted else None
    )


def _lives_on(t: Process) -> bool:
    """The same process, alive and not exiting. py-spy stops on a target whose executable it
    can no longer read, which happens as the process exits, before it is a zombie: a job ending
    must not look like py-spy stopping by itself."""
    try:
        return t.is_running() and bool(psutil.Process(t.pid).exe())
    except psutil.Error:
        return False


def _collect(
    spies: list[record.TreeRecorder],
    targets: Targets,
    run_dir: Path,
    meta: dict[str, Any],
    exited: dict[int, float],
    wall: float,
) -> dict[str, Any]:
    att = meta["attach"]
    workers: list[dict[str, Any]] = []
    errors = []
    for spy, t, entry in zip(spies, targets.processes, att["targets"], strict=True):
        if spy.error is not None:
            errors.append(spy.error)
            continue
        files = record.split(spy.segments, run_dir, t.cwd)
        record.remove(raw for raw, _started in spy.segments)
        own = files.get(t.pid)
        entry.update(
            file=own[0] if own else None,
            started_at=spy.started_at,
            py_spy_restarts=len(spy.segments) - 1,
        )
        for pid, (name, _n) in files.items():
            if pid != t.pid:
                workers.append({"pid": pid, "parent": t.pid, "file": name})
    att["workers"] = workers
    main = att["targets"][0]
    gone = exited.get(targets.processes[0].pid)
    att["target_exit"] = f"exited during sampling, after {gone:.1f} s" if gone is not None else None
    stacks: dict[str, Any] = {"pid": main["pid"], "chunks": []}
    if main.get("file"):
        stacks["chunks"] = [
            {"file": main["file"], "started_at": main["started_at"], "rate_hz": att["rate_hz"]}
        ]
    else:
        stacks["error"] = errors[0] if errors else "py-spy recorded no stacks of the main process"
    return {"stacks": stacks, "wall_s": wall, "attach": att}
