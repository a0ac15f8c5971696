"""A live run: launcher + samplers + live view, until the job ends; then analysis and report."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainprof import signals
from trainprof.analysis.outcome import job_exception, killed_at_shutdown
from trainprof.collect.interpreter import job_python, startup_hint
from trainprof.collect.launcher import (
    Job,
    exit_code_of,
    probe_blocked_by,
    probe_env,
    resolve_command,
)
from trainprof.collect.live import LiveStats, LiveView
from trainprof.collect.output import TerminalLock
from trainprof.collect.probe_state import ProbeWatch, probe_state
from trainprof.collect.samplers import at_work
from trainprof.collect.samplers import progress as progress_page
from trainprof.collect.samplers.hang import HANG_STACKS, dump_stacks
from trainprof.collect.samplers.loop import DEFAULT_INTERVAL_S, SamplerLoop
from trainprof.collect.samplers.progress import ProgressPage
from trainprof.collect.samplers.stack_starter import StackStarter
from trainprof.collect.samplers.stacks import StackRecorder
from trainprof.collect.samplers.suspended import Suspensions
from trainprof.collect.watchdog import Watchdog
from trainprof.doctor.cpu import usable_cpu_count
from trainprof.limits import HANG_SILENCE_S, HANG_STEP_MULTIPLE
from trainprof.render.text import make_console
from trainprof.report import report, write_run_json
from trainprof.store import rundir
from trainprof.store.abandoned import process_started
from trainprof.store.redact import redact
from trainprof.store.schema import (
    ENV_DISABLE,
    ENV_NO_REDACT,
    PROBE_STOPPED,
    event_file_name,
)
from trainprof.store.session import Session
from trainprof.units import plural
from trainprof.version import __version__

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


def usable_cpus() -> int | None:
    """Affinity and cgroup quota counted, exactly as `trainprof doctor` counts."""
    return usable_cpu_count()


def run(opts: RunOptions) -> int:
    command = resolve_command(opts.command)
    shown = list(command) if opts.no_redact else redact(command)  # stored and printed
    if opts.json_path is not None:
        rundir.check_user_file(opts.json_path)  # before the job: never a run without its file
    from trainprof.render.html import check_view_path

    for option, path in (("--trace", opts.trace_path), ("--html", opts.html_path)):
        if path is not None:
            check_view_path(path, option)
    explicit = opts.run_dir is not None
    run_dir = rundir.create(opts.run_dir or rundir.default_run_dir(shown), explicit)
    meta: dict[str, Any] = {
        "trainprof_version": __version__,
        "command": shown,
        "python": job_python(opts.command, command),  # the job's interpreter (None: not Python)
        "redacted": not opts.no_redact,
        "cwd": os.getcwd(),
        "run_dir": str(run_dir),
        "usable_cpus": usable_cpus(),
        "cpu_count": os.cpu_count(),
        "interval_s": opts.interval_s,
        "max_steps": opts.steps,
        "timeout_s": opts.timeout_s,
        "wall_start": time.time(),
        # run.json is written at the start without exit_code: `trainprof report` on a run whose
        # runner died (SIGKILL, the OOM killer) tells it from one still running by this.
        "runner": {"pid": os.getpid(), "started": process_started(os.getpid())},
    }
    blocked = probe_blocked_by(command)
    if blocked is not None:
        meta["probe"] = {"loaded": False, "reason": blocked}
        print(f"trainprof: {blocked}; the report will have host metrics only", file=sys.stderr)
    recording = _Recording(run_dir)
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
    before = signals.catch(STOP_SIGNALS, lambda signum, _frame: held.append(signum))
    job = Job(command, env, run_dir, terminal)
    job.start()
    # The analysis and the renderers are imported while the job starts up, not before it (the
    # job would wait for them) nor after it ends (its report would): ~0.2 s of imports here.
    threading.Thread(target=_import_the_analysis, name="trainprof-imports", daemon=True).start()
    guard.watch(job.pid, signal.SIGTERM)
    recording.started_at = job.started_at
    meta["t_launch"] = job.started_at
    meta["pid"] = job.pid
    recording.write(rundir.META, meta)
    sampler = SamplerLoop(
        job.pid,
        run_dir / rundir.SAMPLES,
        opts.interval_s or DEFAULT_INTERVAL_S,
        adaptive=opts.interval_s is None,
    )
    sampler.start()
    live = LiveView(str(run_dir), terminal, sys.stderr.fileno())

    def stacks_started(starter: StackStarter, rec: StackRecorder, previous: int | None) -> None:
        """A py-spy chunk started: the watchdog stops it too; run.json lists it at once, so a
        report of a run whose runner died still has the stacks."""
        if previous is not None:
            guard.forget(previous)
        if rec.spy_pid is not None:
            guard.watch(rec.spy_pid, signal.SIGINT)  # SIGINT: py-spy writes what it recorded
        for note in rec.notes:  # its rate lowered: py-spy cost the job too much
            _say(live, f"trainprof: {note}")
        rec.notes.clear()
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
        sampler.stop()
        job.finish()
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
        meta["probe"] = probe_state(run_dir, blocked)
        probe.check(lambda message: _say(live, message))  # a job too short for the loop to see
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


def _import_the_analysis() -> None:
    import trainprof.analysis.pipeline  # noqa: F401
    import trainprof.compare.settings  # noqa: F401
    import trainprof.render.console  # noqa: F401
    import trainprof.render.json_report  # noqa: F401


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
        self.recording: _Recording | None = None  # whether the run directory still records
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
            typical = (
                sorted(stats.per_step_s)[len(stats.per_step_s) // 2] if stats.per_step_s else 0.0
            )
            limit = max(self.MIN_SILENCE_S, self.STEP_MULTIPLE * typical)
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
            _say(
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


def _supervise(
    job: Job,
    live: LiveView,
    sampler: SamplerLoop,
    opts: RunOptions,
    stacks: StackStarter | None,
    watch: HangWatch,
    recording: _Recording | None = None,
    held: list[int] | None = None,
    probe: ProbeWatch | None = None,
) -> str | None:
    """Wait for the job, forwarding signals (first those ``held`` since it started), drawing the
    status line, enforcing --timeout."""
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
                    probe.check(lambda message: _say(live, message))
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


def _stop_reason(session: Session) -> str | None:
    for p in session.processes:
        for info in p.infos:
            if info.get("stop") == "steps":
                return "steps"
    return None


def _say(live: LiveView | None, message: str) -> None:
    """One line of trainprof's on stderr while the job runs: the status line erased first, and
    on a line of its own when the job's output stopped mid-line."""
    lead = ""
    if live is not None:
        live.erase()
        if live.terminal is not None and not live.terminal.at_line_start:
            lead = "\n"
    print(f"{lead}{message}", file=sys.stderr, flush=True)


class _Recording:
    """Whether the run directory still takes what trainprof writes. The first write that fails
    (a full disk: the output copy, samples, run.json) stops recording; the job runs on exactly as
    without trainprof and its output still flows. trainprof says so in one line, and the report
    covers what was recorded, flagged in ``meta["recording"]``: ``{"stopped_at_s": seconds
    since the job's launch, "reason": the error, "file": the file that failed first}``. The
    probe inside the job stops on its own at its first failed write (``EventWriter.stopped``)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.started_at = time.monotonic()  # the job's launch, once it is known
        self.stopped: dict[str, Any] | None = None
        self._when: float | None = None
        self._announced = False
        self.probe_stopped = False  # a probe of the job said its recording stopped
        rundir.reserve_space(run_dir)  # given back for run.json and report.json at a full disk
        progress_page.create(run_dir)  # where the probes count the steps they cannot record

    def blinds_the_watch(self) -> bool:
        """Whether the probes' event files stopped too: a probe said it stopped, or the disk
        is full (the runner's own write failed for space), so theirs fail as well."""
        full = {os.strerror(e) for e in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)}
        return self.probe_stopped or (self.stopped is not None and self.stopped["reason"] in full)

    @property
    def when(self) -> float | None:
        """When recording stopped (monotonic), or None while it goes on."""
        return self._when

    def after_stop(
        self, counted: progress_page.Unrecorded, stood_down: dict[str, Any] | None
    ) -> None:
        """What the job made once recording stopped, and whether the hang watch stood down: in
        ``meta["recording"]`` as ``unrecorded`` ({"steps", "batches", "backward_passes"}) and
        ``hang_watch_stood_down_at_s``."""
        if self.stopped is None:
            return
        if counted.pids:
            self.stopped["unrecorded"] = {
                "steps": counted.steps,
                "batches": counted.batches,
                "backward_passes": counted.backwards,
            }
        if stood_down is not None:
            self.stopped["hang_watch_stood_down_at_s"] = stood_down["at_s"]

    def failed(self, when: float, reason: str, name: str) -> None:
        if self._when is None or when < self._when:
            self._when = when
            self.stopped = {
                "stopped_at_s": round(max(0.0, when - self.started_at), 2),
                "reason": reason,
                "file": name,
            }

    def check(self, job: Job, sampler: SamplerLoop, live: LiveView | None) -> None:
        """Collect what the writers ran into; say once that recording stopped."""
        errors = [(p.log_error, p.log_path.name) for p in job.pumps]
        errors.append((sampler.write_error, rundir.SAMPLES))
        if not self.probe_stopped:  # (looked for until one is found)
            probe = self._probe_errors()
            self.probe_stopped = bool(probe)
            errors += probe
        for error, name in errors:
            if error is not None:
                self.failed(error[0], error[1], name)
        self.announce(live)

    def _probe_errors(self) -> list[tuple[tuple[float, str] | None, str]]:
        """Processes of the job whose probe stopped recording (``EventWriter._failed``)."""
        out: list[tuple[tuple[float, str] | None, str]] = []
        for path in self.run_dir.glob(f"{PROBE_STOPPED}*"):
            pid, _, err = path.name[len(PROBE_STOPPED) :].partition("-")
            try:
                ago = time.time() - path.stat().st_mtime
                reason = os.strerror(int(err)) if int(err) else "the probe's writer failed"
                out.append(((time.monotonic() - max(ago, 0.0), reason), event_file_name(int(pid))))
            except (OSError, ValueError):
                continue
        return out

    def announce(self, live: LiveView | None) -> None:
        s = self.stopped
        if s is None or self._announced:
            return
        self._announced = True
        _say(
            live,
            f"trainprof: recording stopped {s['stopped_at_s']:.1f} s into the run: "
            f"{s['reason']} (writing {self.run_dir / s['file']}); the job goes on and its output "
            "still flows; the report covers what was recorded until then",
        )

    def write(self, name: str, data: Any) -> bool:
        """Write a JSON file of the run; the space held back is given back only once the job
        has ended (``save_meta``), so it is still there for run.json and report.json."""
        path = self.run_dir / name
        try:
            rundir.write_json(path, data)
            return True
        except OSError as exc:
            self.failed(time.monotonic(), exc.strerror or str(exc), name)
            return False

    def save_meta(self, meta: dict[str, Any]) -> None:
        """After the job: run.json, with the recording flag, using the space held back if need be."""
        if self.stopped is not None:
            meta["recording"] = self.stopped
        error = write_run_json(self.run_dir / rundir.META, meta)
        if error is not None:
            self.failed(time.monotonic(), error, rundir.META)
            meta["recording"] = self.stopped
        self.announce(None)
