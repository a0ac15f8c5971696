"""Start the job as a child with the probe injected, forward signals, and collect its exit.

The job runs in its own process group so signals reach it and its DataLoader workers
together. When trainprof owns the terminal, the job's group is made the foreground group, so
Ctrl-C and terminal reads behave exactly as without trainprof; otherwise trainprof forwards
SIGINT/SIGTERM/SIGHUP to the group. Output goes through a pty when trainprof's own stream is a
terminal (the job sees a terminal, line-buffered, as it would without trainprof) and through a
pipe otherwise (as if redirected).
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trainprof
from trainprof import std_fds
from trainprof.collect.interpreter import script_python
from trainprof.collect.output import StreamPump, TerminalLock
from trainprof.errors import TrainprofError
from trainprof.store.rundir import STDERR_LOG, STDOUT_LOG, check_readable
from trainprof.store.schema import ENV_MAX_STEPS, ENV_PKG_PARENT, ENV_RUN_DIR, ENV_STEPS_MIN_S

BOOTSTRAP_DIR = Path(trainprof.__file__).parent / "bootstrap"
PKG_PARENT = Path(trainprof.__file__).parent.parent


def resolve_command(args: list[str]) -> list[str]:
    """A script runs with the ``python`` on PATH (else trainprof's own); anything else must be a
    program on PATH or a path."""
    if not args:
        raise TrainprofError("nothing to run: give a script (train.py) or `-- <command>`")
    first = args[0]
    if first.endswith(".py") or os.sep in first:
        check_readable(Path(first), "script" if first.endswith(".py") else "program")
    if first.endswith(".py"):
        if not Path(first).is_file():
            raise TrainprofError(f"no such script: {first}")
        return [script_python()[0], *args]
    if Path(first).is_dir() and (os.sep in first or shutil.which(first) is None):
        shown = first.rstrip(os.sep) or first
        raise TrainprofError(
            f"{first} is a directory, not a script: give a script ({shown}/train.py) or "
            "`-- <command>`"
        )
    if os.sep in first:
        if not (Path(first).is_file() and os.access(first, os.X_OK)):
            raise TrainprofError(f"not an executable file: {first}")
        return list(args)
    if shutil.which(first) is None:
        if Path(first).is_file():
            raise TrainprofError(
                f"{first} is neither a .py script nor a program on PATH: "
                f"`trainprof run -- python {first}` runs it with Python"
            )
        raise TrainprofError(f"command not found: {first}")
    return list(args)


def probe_env(
    run_dir: Path,
    max_steps: int | None,
    base: dict[str, str] | None = None,
    steps_min_s: float | None = None,
) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(BOOTSTRAP_DIR) + (os.pathsep + old if old else "")
    env[ENV_RUN_DIR] = str(run_dir)
    env[ENV_PKG_PARENT] = str(PKG_PARENT)
    if max_steps:
        env[ENV_MAX_STEPS] = str(max_steps)
        if steps_min_s:
            env[ENV_STEPS_MIN_S] = str(steps_min_s)
    return env


_PYTHON = re.compile(r"python[0-9.]*$")
_BLOCKING_FLAGS = {  # in this order of precedence
    "I": "python -I ignores PYTHONPATH, so the probe could not load",
    "E": "python -E ignores PYTHONPATH, so the probe could not load",
    "S": "python -S skips the site module that imports sitecustomize, so the probe could not load",
}


def probe_blocked_by(command: list[str]) -> str | None:
    """Why the probe cannot load in this command's Python, when its own flags say so: -I and
    -E ignore PYTHONPATH, where the bootstrap sitecustomize is; -S skips the site module that
    imports it. None for anything else (not Python, or none of these flags)."""
    if not command or not _PYTHON.match(Path(command[0]).name):
        return None
    found: set[str] = set()
    args = iter(command[1:])
    for arg in args:
        if arg == "-" or not arg.startswith("-"):
            break  # the script: what follows is its own arguments
        if arg.startswith("--"):
            if arg == "--check-hash-based-pycs":
                next(args, None)
            continue
        ends = False
        for i, ch in enumerate(arg[1:], 2):
            if ch in "cmWX":  # an option's value: the rest of this word, or the next word
                if i == len(arg):
                    next(args, None)
                ends = ch in "cm"  # -c CMD / -m MOD: the interpreter's own options end here
                break
            found.add(ch)
        if ends:
            break
    return next((why for flag, why in _BLOCKING_FLAGS.items() if flag in found), None)


@dataclass
class Job:
    command: list[str]
    env: dict[str, str]
    run_dir: Path
    terminal: TerminalLock | None = None
    proc: subprocess.Popen[bytes] | None = None
    pumps: list[StreamPump] = field(default_factory=list)
    started_at: float = 0.0
    forwarded: list[str] = field(default_factory=list)
    _tty_fd: int | None = None
    _pidfd: int | None = None  # the job's pidfd (-1: none, or closed once it exited)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> None:
        out_r, out_w = _channel(sys.stdout)
        err_r, err_w = _channel(sys.stderr)
        self.started_at = time.monotonic()
        try:
            self.proc = subprocess.Popen(
                self.command, env=self.env, stdout=out_w, stderr=err_w, **_child_setup()
            )
        except OSError as exc:
            for fd in (out_r, out_w, err_r, err_w):
                os.close(fd)
            raise TrainprofError(f"could not start {self.command[0]}: {exc.strerror}") from None
        os.close(out_w)
        os.close(err_w)
        self.pumps = [
            StreamPump(out_r, sys.stdout.fileno(), self.run_dir / STDOUT_LOG, self.terminal),
            StreamPump(err_r, sys.stderr.fileno(), self.run_dir / STDERR_LOG, self.terminal),
        ]
        for p in self.pumps:
            p.start()
        self._give_terminal()

    def poll(self, timeout: float) -> int | None:
        """The job's exit status, or None once ``timeout`` passed: one wake-up on a pidfd where
        the kernel has them (Popen.wait wakes ~40 times a second to poll)."""
        assert self.proc is not None
        fd = self._exit_fd()
        if fd is not None and self.proc.returncode is None and timeout > 0:
            select.select([fd], [], [], timeout)
            code = self.proc.poll()
        else:
            try:
                code = self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                code = None
        if code is not None and fd is not None:
            os.close(fd)
            self._pidfd = -1
        return code

    def _exit_fd(self) -> int | None:
        """A file descriptor readable once the job has exited (None: the kernel has none)."""
        if self._pidfd is None:
            try:
                self._pidfd = os.pidfd_open(self.pid)
            except (AttributeError, OSError):  # Linux < 5.3
                self._pidfd = -1
        return self._pidfd if self._pidfd >= 0 else None

    def send(self, sig: int) -> None:
        """Signal the job's whole process group (main process and its workers)."""
        self.forwarded.append(signal.Signals(sig).name)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)

    def finish(self, grace_s: float = 1.0) -> list[int]:
        """After the main process ended: take the terminal back, give the processes left in its
        group ``grace_s`` to end (DataLoader workers do), and drain the output. What still runs
        is left running, as plain ``python`` leaves it; returns those processes' pids."""
        self._take_terminal_back()
        deadline = time.monotonic() + grace_s
        while (left := _live_members(self.pid)) and time.monotonic() < deadline:
            time.sleep(0.05)
        for p in self.pumps:
            p.hand_on()  # a daemon holding its output holds trainprof no longer
        return left

    def _give_terminal(self) -> None:
        """Make the job the terminal's foreground group, as a shell would."""
        try:
            fd = sys.stdin.fileno()
            if not os.isatty(fd) or os.tcgetpgrp(fd) != os.getpgrp():
                return
            with _ignoring(signal.SIGTTOU):
                os.tcsetpgrp(fd, self.pid)
            self._tty_fd = fd
        except (OSError, ValueError, AttributeError):
            self._tty_fd = None

    def _take_terminal_back(self) -> None:
        if self._tty_fd is None:
            return
        with contextlib.suppress(OSError), _ignoring(signal.SIGTTOU):
            os.tcsetpgrp(self._tty_fd, os.getpgrp())
        self._tty_fd = None


def exit_code_of(returncode: int) -> int:
    """Killed by signal N → 128+N, as a shell reports it."""
    return 128 - returncode if returncode < 0 else returncode


def _channel(stream: object) -> tuple[int, int]:
    """(read end for trainprof, write end for the job): a pty if the stream is a terminal."""
    try:
        fileno = stream.fileno()  # type: ignore[attr-defined]
        is_tty = os.isatty(fileno)
    except (AttributeError, OSError, ValueError):
        is_tty = False
    if is_tty:
        import pty
        import termios

        master, slave = pty.openpty()
        with contextlib.suppress(termios.error, OSError):
            attrs = termios.tcgetattr(slave)
            attrs[1] &= ~termios.ONLCR  # pass "\n" through as "\n"
            termios.tcsetattr(slave, termios.TCSANOW, attrs)
            import fcntl

            size = fcntl.ioctl(fileno, termios.TIOCGWINSZ, b"\0" * 8)
            fcntl.ioctl(slave, termios.TIOCSWINSZ, size)
        return master, slave
    return os.pipe()


def _child_setup() -> dict[str, Any]:
    """Popen's settings for the job: a process group of its own, and closed the standard
    descriptors trainprof was started without (``std_fds``), as the job would have them."""
    if not std_fds.CLOSED:
        if sys.version_info >= (3, 11):
            return {"process_group": 0}
        return {"preexec_fn": os.setpgrp}  # pragma: no cover (Python 3.10)

    def setup() -> None:  # in the child, between fork and exec: no thread runs there
        os.setpgrp()
        std_fds.close_in_child()

    return {"preexec_fn": setup}


def process_name(pid: int) -> str:
    """The process's command name (``/proc/PID/comm``), or ``?`` once it is gone."""
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
            return f.read().strip() or "?"
    except OSError:
        return "?"


def _live_members(pgid: int) -> list[int]:
    """The pids of the group's members that are not zombies (killpg(0) counts zombies too)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return []
    except PermissionError:
        pass
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(name))
    return found


@contextlib.contextmanager
def _ignoring(sig: int):  # type: ignore[no-untyped-def]
    old = signal.signal(sig, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(sig, old)
