"""A live run: launcher + samplers + live view, until the job ends; then analysis and report."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainprof import signals
from trainprof.collect.interpreter import job_python, startup_hint
from trainprof.collect.launcher import (
    Job,
    exit_code_of,
    probe_blocked_by,
    probe_env,
    process_name,
    resolve_command,
)
from trainprof.collect.output import TerminalLock
from trainprof.collect.recording import Recording
from trainprof.collect.watchdog import Watchdog
from trainprof.store import rundir
from trainprof.store.redact import configure as redact_config
from trainprof.store.redact import redact
from trainprof.store.schema import (
    ENV_DISABLE,
    ENV_NO_REDACT,
)
from trainprof.version import __version__

if TYPE_CHECKING:  # imported in run() once the job has started: the job does not wait for them
    from trainprof.collect.hang_watch import HangWatch
    from trainprof.collect.live import LiveView
    from trainprof.collect.probe_state import ProbeWatch
    from trainprof.collect.samplers.loop import SamplerLoop
    from trainprof.collect.samplers.stack_starter import StackStarter
    from trainprof.collect.samplers.stacks import StackRecorder
    from trainprof.export.prometheus import MetricsServer
    from trainprof.store.session import Session

TIMEOUT_EXIT = 124  # as GNU timeout


@dataclass(frozen=True)
class RunOptions:
    command: list[str]
    run_dir: Path | None = None
    json_path: Path | None = None
    steps: int | None = None
    steps_min_s: float | None = None  # with steps: run at least this long after the first step
    timeout_s: float | None = None
    interval_s: float | None = None  # None: 0.5 s, widening to 2 s after ten minutes
    quiet: bool = False
    verbose: bool = False
    stacks: bool = True
    on_hang: str | None = None  # "report" | "kill"; None: kill with --timeout, else report
    hang_after_s: float | None = None  # None: max(10 s, 20 median steps)
    no_redact: bool = False  # store and print the command as given, secrets included
    trace_path: Path | None = None  # --trace: a Chrome Trace Event Format file of the run
    html_path: Path | None = None  # --html: a self-contained HTML report with plots
    # trainprof's own option names: a job that fails on one given after the script is told so
    option_names: frozenset[str] = frozenset()
    # Called with the loaded run and its report dict once the report is out (trainprof ci).
    on_report: Callable[[Session, dict[str, Any]], None] | None = None
    metrics: MetricsServer | None = None  # --metrics-port: serves the live view's numbers


def usable_cpus(pid: int) -> int | None:
    """The job's: its affinity and cgroup quota counted, exactly as `trainprof doctor` counts."""
    from trainprof.doctor.cpu import usable_cpu_count

    return usable_cpu_count(pid)


def run(opts: RunOptions) -> int:
    command = resolve_command(opts.command)
    redact_config(enabled=not opts.no_redact, argv=command)  # trainprof's option, not the job's
    shown = list(command) if opts.no_redact else redact(command)  # stored and printed
    if opts.json_path is not None:
        rundir.check_user_file(opts.json_path)  # before the job: never a run without its file
    for option, path in (("--trace", opts.trace_path), ("--html", opts.html_path)):
        if path is not None:
            from trainprof.render.html import check_view_path

            check_view_path(path, option)
    explicit = opts.run_dir is not None
    run_dir = rundir.create(opts.run_dir or rundir.default_run_dir(shown), explicit)
    meta: dict[str, Any] = {
        "trainprof_version": __version__,
        "command": shown,
        "python": job_python(opts.command, command),  # the job's interpreter (None: not Python)
        "redacted": not opts.no_redact,
        "cwd": rundir.current_dir(),
        "run_dir": str(run_dir),
        "usable_cpus": None,  # read once the job has started, as the runner's start time
        "cpu_count": os.cpu_count(),
        "interval_s": opts.interval_s,
        "max_steps": opts.steps,
        "timeout_s": opts.timeout_s,
        "wall_start": time.time(),
        # run.json is written at the start without exit_code: `trainprof report` on a run whose
        # runner died (SIGKILL, the OOM killer) tells it from one still running by this.
        "runner": {"pid": os.getpid(), "started": None},
    }
    blocked = probe_blocked_by(command)
    if blocked is not None:
        meta["probe"] = {"loaded": False, "reason": blocked}
        print(f"trainprof: {blocked}; the report will have host metrics only", file=sys.stderr)
    recording = Recording(run_dir)
    guard = Watchdog()  # should trainprof die, the job and py-spy go with it
    guard.start()
    interactive = sys.stderr.isatty() and not opts.quiet
    terminal = TerminalLock() if interactive else None
    env = probe_env(run_dir, opts.steps, steps_min_s=opts.steps_min_s)
    env.pop(ENV_NO_REDACT, None)  # the probe redacts exactly when run.json does
    if opts.no_redact:
        env[ENV_NO_REDACT] = "1"  # the probe's event-file headers keep argv as given too
    # From the job's start, a Ctrl-C is the job's: held until _supervise passes it on (it
    # stopped trainprof before, and its watchdog the job, with no report).
    held: list[int] = []
    if (note := _ctrl_c_ignored()) is not None:
        print(note, file=sys.stderr)
    before = signals.catch(STOP_SIGNALS, lambda signum, _frame: held.append(signum))
    job = Job(command, env, run_dir, terminal)
    job.start()
    guard.watch(job.pid, signal.SIGTERM)
    recording.started_at = job.started_at
    meta["t_launch"] = job.started_at
    meta["pid"] = job.pid
    recording.write(rundir.META, meta)  # at once: a full disk is told as of the launch
    # What watches the job is imported while the job starts up, not before it (the job would
    # wait for it), and the host sampler first: trainprof's cost counts from its first sample.
    from trainprof.collect.samplers.loop import DEFAULT_INTERVAL_S, SamplerLoop

    sampler = SamplerLoop(
        job.pid,
        run_dir / rundir.SAMPLES,
        opts.interval_s or DEFAULT_INTERVAL_S,
        adaptive=opts.interval_s is None,
    )
    sampler.start()
    from trainprof.analysis.outcome import job_exception, killed_at_shutdown
    from trainprof.collect.hang_watch import HangWatch
    from trainprof.collect.live import LiveView
    from trainprof.collect.live_judge import LiveJudge
    from trainprof.collect.probe_state import ProbeWatch, probe_state
    from trainprof.collect.samplers.stack_starter import StackStarter
    from trainprof.collect.say import say
    from trainprof.render.text import make_console
    from trainprof.store.abandoned import process_started
    from trainprof.store.session import Session

    # The analysis and the renderers, which only the job's end needs, in a thread meanwhile.
    threading.Thread(target=_import_the_analysis, name="trainprof-imports", daemon=True).start()
    meta["usable_cpus"] = usable_cpus(job.pid)
    meta["runner"]["started"] = process_started(os.getpid())
    recording.write(rundir.META, meta)
    live = LiveView(str(run_dir), terminal, sys.stderr.fileno(), LiveJudge(run_dir, job.started_at))
    if opts.metrics is not None:
        opts.metrics.watch(live)

    def stacks_started(starter: StackStarter, rec: StackRecorder, previous: int | None) -> None:
        """A py-spy chunk started: the watchdog stops it too; run.json lists it at once, so a
        report of a run whose runner died still has the stacks."""
        if previous is not None:
            guard.forget(previous)
        if rec.spy_pid is not None:
            guard.watch(rec.spy_pid, signal.SIGINT)  # SIGINT: py-spy writes what it recorded
        meta["stacks"] = starter.describe()
        recording.write(rundir.META, meta)

    stacks = StackStarter(run_dir, job, command, stacks_started) if opts.stacks else None
    watch = HangWatch(opts, run_dir)
    watch.recording = recording
    watch.suspensions.started_at = job.started_at
    # nothing to say where the command's flags said it, or the probe was switched off (bench)
    switched_off = "all" in os.environ.get(ENV_DISABLE, "").split(",")
    probe = ProbeWatch(run_dir, job.pid, already_said=blocked is not None or switched_off)
    stopped_by = _supervise(job, live, sampler, opts, stacks, watch, recording, held, probe)
    ended = time.monotonic()  # the main process's end, not that of a process holding its output
    signals.restore(before)
    with _Finishing():  # the job has ended: a Ctrl-C now must not cost its report
        if watch.hang is not None:
            meta["hang"] = watch.hang
        elif stopped_by in ("timeout", "interrupt") and (
            at_work_then := watch.stopped_at_work(live.stats, time.monotonic())
        ):
            meta["hang"] = at_work_then
        if suspended := watch.suspensions.finish(time.monotonic()):
            meta["suspended"] = suspended
        live.erase()
        live.close()
        if opts.metrics is not None:
            opts.metrics.close()
        sampler.stop()
        if left := job.finish():
            meta["outlived"] = left
            say(live, _outlived_line(left))
        if stacks is not None:
            meta["stacks"] = stacks.finish()
        guard.done()
        assert job.proc is not None and job.proc.returncode is not None
        rc = job.proc.returncode
        meta.update(
            exit_code=exit_code_of(rc),
            signal=signal.Signals(-rc).name if rc < 0 else None,
            wall_s=ended - job.started_at,
            forwarded=job.forwarded,
            samples=sampler.count,
            output={
                "stdout_bytes": job.pumps[0].total_bytes,
                "stdout_lines": job.pumps[0].total_lines,
                "stderr_bytes": job.pumps[1].total_bytes,
                "stderr_lines": job.pumps[1].total_lines,
            },
        )
        if stopped_by == "interrupt" and job.forwarded:
            meta["stop_signal"] = job.forwarded[0]  # SIGINT (a Ctrl-C), SIGTERM or SIGHUP
        meta["probe"] = probe_state(run_dir, blocked)
        probe.check(lambda message: say(live, message))  # a job too short for the loop to see
        recording.check(job, sampler, live)
        recording.after_stop(watch.page.read(), watch.stood_down)
        recording.save_meta(meta)
        session = Session.load(run_dir)
        meta["stopped_by"] = stopped_by or _stop_reason(session)
        meta["exception"] = job_exception(session)
        meta["hint"] = startup_hint(meta, session.stderr_tail, opts.option_names)
        meta["killed_at_shutdown"] = killed_at_shutdown(session)
        session.meta = meta
        recording.save_meta(meta)
        code = TIMEOUT_EXIT if stopped_by in ("timeout", "hang") else exit_code_of(rc)
        never = never_ran(meta, session.stderr_tail)
        if never is not None and opts.on_report is None and not opts.verbose:
            _say_never_ran(never, session, opts, run_dir, explicit)
            return code
        console = make_console(stderr=True)
        try:
            data = report(
                session,
                opts.json_path,
                verbose=opts.verbose,
                console=console,
                live=live,
                trace_path=opts.trace_path,
                html_path=opts.html_path,
            )
        except Exception as exc:  # a trainprof bug: the job's exit code is still the job's
            _report_failed(exc, run_dir)
            rundir.release_space(run_dir)
            return code
        if opts.on_report is not None:
            opts.on_report(session, data)
        from trainprof.render import console as console_render

        hint = console_render.rerender_hint(meta)
        if hint is not None:
            console.print(hint)
        rundir.release_space(run_dir)
        return code


REPORT_ERROR = "report-error.txt"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # a user stopping the job


def report(session: Session, json_path: Path | None, **options: Any) -> dict[str, Any]:
    """The job's report: ``trainprof.report.report``, imported once the job has started."""
    from trainprof.report import report as analyse_and_report

    return analyse_and_report(session, json_path, **options)


def _import_the_analysis() -> None:
    """Import what the report needs; a failure is left to the report's own import to raise."""
    with contextlib.suppress(Exception):
        import trainprof.analysis.pipeline  # noqa: F401
        import trainprof.compare.settings  # noqa: F401
        import trainprof.render.console  # noqa: F401
        import trainprof.render.json_report  # noqa: F401
        import trainprof.report  # noqa: F401


def _report_failed(exc: Exception, run_dir: Path) -> None:
    """Say that the report failed, in one line, and keep the traceback for the bug report: the
    run directory holds all that was recorded, so `trainprof report` can try again."""
    import traceback

    where = run_dir / REPORT_ERROR
    try:
        rundir.write_user_file(where, "".join(traceback.format_exception(exc)))
        kept = f"; its traceback is in {where}"
    except OSError:
        kept = ""
    print(
        f"trainprof: the report failed ({type(exc).__name__}: {exc}), a trainprof bug{kept}. "
        f"The run is stored: `trainprof report {run_dir}` tries again.",
        file=sys.stderr,
    )


class _Finishing:
    """While trainprof stops its samplers and writes the report of a job that has ended, a
    first Ctrl-C (or SIGTERM, SIGHUP) is said, not obeyed: the report is what the user ran the
    job for, and a Ctrl-C meant for the job often lands just after it ended. A second one stops
    trainprof at once, without the report."""

    def __enter__(self) -> _Finishing:
        self.seen = 0
        self.previous = signals.catch(STOP_SIGNALS, self._on_signal)
        return self

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self.seen += 1
        if self.seen > 1:
            raise KeyboardInterrupt
        with contextlib.suppress(OSError, ValueError):  # a closed terminal: go on quietly
            sys.stderr.write(
                "trainprof: the job has ended; finishing its report "
                "(press Ctrl-C again to stop without it)\n"
            )
            sys.stderr.flush()

    def __exit__(self, *_exc: object) -> None:
        signals.restore(self.previous)


def _supervise(
    job: Job,
    live: LiveView,
    sampler: SamplerLoop,
    opts: RunOptions,
    stacks: StackStarter | None,
    watch: HangWatch,
    recording: Recording | None = None,
    held: list[int] | None = None,
    probe: ProbeWatch | None = None,
) -> str | None:
    """Wait for the job, forwarding signals (first those ``held`` since it started), drawing the
    status line, enforcing --timeout."""
    from trainprof.collect.say import say

    stopped_by: list[str] = []

    def forward(signum: int, _frame: Any) -> None:
        """First signal: pass it on. A second one: the user means it, kill the job's group."""
        if stopped_by:
            job.send(signal.SIGKILL)
            return
        stopped_by.append("interrupt")
        job.send(signum)

    previous = signals.catch(STOP_SIGNALS, forward)
    for signum in held or ():
        forward(signum, None)
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
                if recording is not None:
                    recording.check(job, sampler, live)
                if probe is not None:
                    probe.check(lambda message: say(live, message))
                    live.no_probe = probe.missing
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
        signals.restore(previous)
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


def _ctrl_c_ignored() -> str | None:
    """What to say when trainprof was started with SIGINT ignored (a script's background job,
    ``nohup``) and a user at a terminal may press Ctrl-C: the job inherits that, as without
    trainprof, so the Ctrl-C does nothing; said once, at the start."""
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        return None
    try:
        if not os.isatty(sys.stderr.fileno()):
            return None
    except (OSError, ValueError, AttributeError):
        return None
    stop = (
        f"; `kill {os.getpid()}` stops it with a report"
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN
        else ""
    )
    return (
        "trainprof: Ctrl-C is ignored here (started with SIGINT ignored, as a shell starts a "
        f"script's background job or nohup does): the job ignores it too, as without trainprof{stop}"
    )


_NO_SCRIPT = re.compile(r"^\S*python[0-9.]*: (can't open file .*|No module named .*)$")
_COMPILE_ERRORS = ("SyntaxError", "IndentationError", "TabError")


def never_ran(meta: dict[str, Any], stderr_tail: str) -> str | None:
    """Why the job's script never ran its first line (it did not compile, or its Python found
    no such script or module), in words; None for a job that ran."""
    if meta.get("exit_code") in (0, None) or meta.get("stopped_by") or meta.get("signal"):
        return None
    exc = meta.get("exception") or {}
    scripts = [os.path.basename(a) for a in meta.get("command") or [] if str(a).endswith(".py")]
    said = re.search(r"\(([^()]*), line \d+\)$", str(exc.get("message", "")))
    if exc.get("type") in _COMPILE_ERRORS and said and said.group(1) in scripts[:1]:
        return f"the script did not compile ({exc['type']}, above)"
    started = _NO_SCRIPT.match(stderr_tail.strip().rsplit("\n", 1)[-1])
    if not exc and started is not None:
        return f"its Python could not start it ({started.group(1)})"
    return None


def _say_never_ran(
    never: str, session: Session, opts: RunOptions, run_dir: Path, explicit: bool
) -> None:
    """A job whose script never ran: Python's own error says it all; trainprof adds one line
    (no report panel: there was nothing to measure). The files asked for are still written;
    a default run directory nothing asked for is not kept."""
    import io
    import shutil

    from rich.console import Console

    asked = opts.json_path or opts.trace_path or opts.html_path
    if explicit or asked:
        with contextlib.suppress(Exception):  # the files, as for any run; nothing printed
            report(
                session, opts.json_path, console=Console(file=io.StringIO()),
                trace_path=opts.trace_path, html_path=opts.html_path,
            )  # fmt: skip
        print(
            f"trainprof: {never}: nothing ran to profile (run directory: {run_dir})",
            file=sys.stderr,
        )
        return
    shutil.rmtree(run_dir, ignore_errors=True)
    if run_dir.parent.name == rundir.RUNS_DIR:
        with contextlib.suppress(OSError):  # made for this run, and empty now
            run_dir.parent.rmdir()
    print(f"trainprof: {never}: nothing ran to profile", file=sys.stderr)


def _outlived_line(pids: list[int]) -> str:
    """What trainprof says of the processes the job left running: it leaves them, as plain
    ``python`` does, and stops waiting for them."""
    shown = ", ".join(f"{pid} ({process_name(pid)})" for pid in pids[:5])
    more = f" and {len(pids) - 5} more" if len(pids) > 5 else ""
    return (
        f"trainprof: the job's main process ended; processes it started still run (pid "
        f"{shown}{more}): left running, as without trainprof"
    )


def _stop_reason(session: Session) -> str | None:
    for p in session.processes:
        for info in p.infos:
            if info.get("stop") == "steps":
                return "steps"
    return None
