"""Profile a block of code in the running interpreter: a notebook cell, a function, a script's loop.

``with trainprof.profile() as p: train()`` (or ``p = trainprof.start()`` … ``p.stop()``) loads
the same probe as ``trainprof run`` into this process, samples the host and py-spy's stacks from
a helper process, and at the end gives the same report (same rules, same JSON, a run directory
``trainprof report`` reads again). ``stop`` takes the probe out again: no hook, thread or
process of trainprof's stays behind.
"""

from __future__ import annotations

import ctypes
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from trainprof.errors import TrainprofError

READY_TIMEOUT_S = 60.0
DONE_TIMEOUT_S = 60.0
PR_SET_PTRACER = 0x59616D61  # Yama: let this process (and its children) trace the caller


class Profile:
    """One profiled span of this process: ``start``, then ``stop`` gives the report."""

    def __init__(
        self,
        run_dir: str | Path | None = None,
        stacks: bool = True,
        print_report: bool = True,
        label: str = "in-process",
    ) -> None:
        self.run_dir_given = Path(run_dir) if run_dir is not None else None
        self.stacks = stacks
        self.print_report = print_report
        self.label = label
        self.run_dir: Path | None = None
        self.report: dict[str, Any] | None = None  # the JSON report, once stopped
        self.text = ""  # the console report, once stopped
        self.left_behind: list[str] = []  # what the probe could not undo (none: clean)
        self._meta: dict[str, Any] = {}
        self._env: dict[str, str | None] = {}
        self._recorder: subprocess.Popen[bytes] | None = None
        self._recorder_pid: int | None = None

    # -- the span ---------------------------------------------------------------------------

    def start(self) -> Profile:
        """Start recording this process; a TrainprofError where it cannot (already recorded)."""
        from trainprof.probe import records
        from trainprof.store import rundir
        from trainprof.store.abandoned import process_started
        from trainprof.version import __version__

        if records.writer() is not None:
            raise TrainprofError(
                "this process is already recorded by trainprof (a `trainprof run` or a "
                "profile not yet stopped): stop that one first"
            )
        explicit = self.run_dir_given is not None
        run_dir = rundir.create(
            self.run_dir_given or rundir.default_run_dir([self.label]), explicit
        )
        self.run_dir = run_dir
        started = time.monotonic()
        self._meta = {
            "trainprof_version": __version__,
            "command": [self.label],
            "python": None,
            "redacted": True,
            "cwd": rundir.current_dir(),
            "run_dir": str(run_dir),
            "usable_cpus": _usable_cpus(),
            "cpu_count": os.cpu_count(),
            "interval_s": None,
            "max_steps": None,
            "timeout_s": None,
            "wall_start": time.time(),
            "t_launch": started,
            "pid": os.getpid(),
            "in_process": True,
            "runner": {"pid": os.getpid(), "started": process_started(os.getpid())},
        }
        rundir.write_json(run_dir / rundir.META, self._meta)
        self._start_recorder(run_dir)
        self._set_env(run_dir)
        from trainprof import probe

        probe.start()
        if records.writer() is None:
            self._restore_env()
            self._stop_recorder()
            raise TrainprofError("the probe did not start in this process (TRAINPROF_DISABLE?)")
        return self

    def stop(self, exc: BaseException | None = None) -> dict[str, Any]:
        """Stop recording, take the probe out, and return the report (printed if asked)."""
        if self.run_dir is None or self._meta.get("wall_s") is not None:
            raise TrainprofError("this profile is not running: call start() first")
        ended = time.monotonic()
        from trainprof import probe
        from trainprof.probe import records

        if exc is not None:
            records.record_info({"exception": type(exc).__name__, "message": str(exc)[:2000]})
        self.left_behind = probe.stop()
        self._restore_env()
        recorded = self._stop_recorder()
        return self._report(ended, exc, recorded)

    def __enter__(self) -> Profile:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop(exc)

    # -- what a notebook shows ----------------------------------------------------------------

    def summary(self) -> str:
        """One line: the first finding, or that none was found, and where the run is stored."""
        if self.report is None:
            return "trainprof: not stopped yet"
        s = self.report.get("summary") or {}
        rate = s.get("steps_per_s")
        pace = f"{rate:.1f} it/s" if isinstance(rate, (int, float)) else "no steady rate"
        problems = [f for f in self.report.get("findings") or [] if f.get("severity") != "info"]
        first = (
            f"{len(problems)} finding(s), first {problems[0]['id']}: {problems[0]['title']}"
            if problems
            else "no problem found"
        )
        return f"trainprof: {pace} · {first} · run directory {self.run_dir}"

    def html(self) -> str:
        """The HTML report, embedded in an iframe (its styles stay its own)."""
        import html as html_lib

        page = self._html_path()
        if page is None or not page.is_file():
            return f"<pre>{html_lib.escape(self.text or self.summary())}</pre>"
        doc = html_lib.escape(page.read_text(encoding="utf-8"), quote=True)
        return (
            f'<iframe srcdoc="{doc}" style="width:100%;height:720px;border:1px solid #ccc" '
            f'title="trainprof report"></iframe>'
        )

    def _repr_html_(self) -> str:
        return self.html()

    # -- the helper process -----------------------------------------------------------------

    def _start_recorder(self, run_dir: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINPROF_")}
        cmd = [sys.executable, "-m", "trainprof.inprocess.recorder", str(run_dir), str(os.getpid())]
        if not self.stacks:
            cmd.append("--no-stacks")
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            close_fds=True,
        )
        proc.wait(timeout=READY_TIMEOUT_S)  # the first process forks the recorder and exits
        self._recorder = proc
        said = _read_line(proc, READY_TIMEOUT_S)
        if not said.startswith("pid "):
            self._stop_recorder()
            raise TrainprofError("trainprof's recorder process did not start")
        self._recorder_pid = int(said.split()[1])
        _allow_tracing_by(self._recorder_pid)
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
        if _read_line(proc, READY_TIMEOUT_S) != "ready":
            self._stop_recorder()
            raise TrainprofError("trainprof's recorder process did not start sampling")

    def _stop_recorder(self) -> dict[str, Any]:
        """Close the recorder's input, wait for it to finish, and read what it recorded."""
        from trainprof.inprocess.recorder import RESULT
        from trainprof.store import rundir

        proc, self._recorder = self._recorder, None
        if proc is None:
            return {}
        if proc.stdin is not None:
            proc.stdin.close()
        deadline = time.monotonic() + DONE_TIMEOUT_S
        while time.monotonic() < deadline and _read_line(proc, deadline - time.monotonic()):
            pass  # "done", then the end of its output: the recorder has exited
        if proc.stdout is not None:
            proc.stdout.close()
        _allow_tracing_by(0)
        if self.run_dir is None:
            return {}
        try:
            data = rundir.read_json(self.run_dir / RESULT)
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    # -- the report ---------------------------------------------------------------------------

    def _report(
        self, ended: float, exc: BaseException | None, recorded: dict[str, Any]
    ) -> dict[str, Any]:
        import io

        from rich.console import Console

        from trainprof.collect.probe_state import probe_state
        from trainprof.report import report
        from trainprof.store import rundir
        from trainprof.store.session import Session

        assert self.run_dir is not None
        meta = self._meta
        meta.update(
            exit_code=1 if exc is not None else 0,
            signal=None,
            wall_s=ended - float(meta["t_launch"]),
            samples=recorded.get("samples", 0),
            stacks=recorded.get("stacks")
            or {"error": "not sampled" if not self.stacks else "the recorder gave no stacks"},
            probe=probe_state(self.run_dir, None),
            stopped_by=None,
        )
        rundir.write_json(self.run_dir / rundir.META, meta)
        session = Session.load(self.run_dir)
        buffer = io.StringIO()
        console = Console(
            file=buffer,
            width=100,
            color_system=None,
            highlight=False,
            markup=False,
            force_jupyter=False,  # the text is kept; a notebook is shown the HTML report
        )
        data = report(session, None, console=console, html_path=self._html_path())
        self.text = buffer.getvalue()
        self.report = data
        if self.print_report:
            sys.stderr.write(self.text)
        return data

    def _html_path(self) -> Path | None:
        return self.run_dir / "report.html" if self.run_dir is not None else None

    def _set_env(self, run_dir: Path) -> None:
        from trainprof.store.schema import ENV_RUN_DIR

        self._env = {ENV_RUN_DIR: os.environ.get(ENV_RUN_DIR)}
        os.environ[ENV_RUN_DIR] = str(run_dir)

    def _restore_env(self) -> None:
        for key, value in self._env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._env = {}


def profile(
    run_dir: str | Path | None = None, stacks: bool = True, print_report: bool = True
) -> Profile:
    """A profile to use as ``with trainprof.profile() as p:``; ``p.report`` holds the result."""
    return Profile(run_dir=run_dir, stacks=stacks, print_report=print_report)


_current: Profile | None = None


def start(run_dir: str | Path | None = None, stacks: bool = True) -> Profile:
    """Start profiling this process until ``stop()``."""
    global _current
    p = Profile(run_dir=run_dir, stacks=stacks).start()
    _current = p
    return p


def stop() -> dict[str, Any]:
    """Stop the profile ``start()`` began, and return its report."""
    global _current
    if _current is None:
        raise TrainprofError("no profile is running: call trainprof.start() first")
    p, _current = _current, None
    return p.stop()


def _read_line(proc: subprocess.Popen[bytes], timeout: float) -> str:
    """The recorder's next line, or "" at its end or after ``timeout``."""
    out = proc.stdout
    if out is None:
        return ""
    readable, _, _ = select.select([out], [], [], max(timeout, 0.0))
    if not readable:
        return ""
    return out.readline().decode(errors="replace").strip()


def _allow_tracing_by(pid: int) -> None:
    """Let ``pid`` (py-spy's parent) read this process's stacks under Yama's ptrace scope 1."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PTRACER, ctypes.c_ulong(pid), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _usable_cpus() -> int | None:
    from trainprof.doctor.cpu import usable_cpu_count

    return usable_cpu_count(os.getpid())
