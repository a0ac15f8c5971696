"""If trainprof itself dies (SIGKILL, the OOM killer), the job must not train on unsupervised.

A small helper process holds the read end of a pipe whose only write end is the runner's. When
the runner dies, however it dies, the kernel closes that end and the helper reads EOF; it then
stops every process group it was told about: the job's (SIGTERM, then SIGKILL after a grace
period, as ``--timeout`` does) and py-spy's (SIGINT, so it writes what it recorded). When the
run ends normally the runner says ``done`` and the helper leaves without touching anything.

``PR_SET_PDEATHSIG`` would reach only the job's main process (not its DataLoader workers, nor
py-spy, which runs in a session of its own), and it fires when the *thread* that forked dies;
the pipe covers every group, whichever thread started it. The helper runs in a session of its
own and ignores the terminal's signals, so a Ctrl-C meant for the job never takes it away.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

GRACE_S = 3.0

# Run with ``python -I -S -c``: nothing imported beyond what the interpreter needs (~10 ms).
HELPER = r"""
import os, signal, sys, time
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
    signal.signal(s, signal.SIG_IGN)
fd, grace = int(sys.argv[1]), float(sys.argv[2])
groups = {}
buf = b""
while True:
    data = os.read(fd, 4096)
    if not data:
        break
    buf += data
    *lines, buf = buf.split(b"\n")
    for line in lines:
        words = line.split()
        if words == [b"done"]:
            sys.exit(0)
        if len(words) == 3 and words[0] == b"watch":
            groups[int(words[1])] = int(words[2])
        elif len(words) == 2 and words[0] == b"forget":
            groups.pop(int(words[1]), None)


def alive(pgid):
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


for pgid, sig in groups.items():
    try:
        os.killpg(pgid, sig)
    except OSError:
        pass
deadline = time.monotonic() + grace
while time.monotonic() < deadline and any(alive(g) for g in groups):
    time.sleep(0.05)
for pgid in groups:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
"""


class Watchdog:
    """The runner's side: ``start()``, ``watch(pgid, signal)`` for each group, ``done()``.

    Fails open: a helper that cannot start (or has gone) leaves the run as it was without one.
    """

    def __init__(self, grace_s: float = GRACE_S) -> None:
        self.grace_s = grace_s
        self._fd: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> bool:
        r, w = os.pipe()  # both ends close-on-exec: neither the job nor py-spy inherits them
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", HELPER, str(r), str(self.grace_s)],
                pass_fds=(r,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except (OSError, ValueError):
            os.close(w)
            return False
        finally:
            os.close(r)
        self._fd = w
        return True

    def watch(self, pgid: int, sig: int) -> None:
        """Should the runner die, send ``sig`` to this group (SIGKILL after the grace period)."""
        self._send(f"watch {pgid} {int(sig)}\n")

    def forget(self, pgid: int) -> None:
        self._send(f"forget {pgid}\n")

    def done(self) -> None:
        """The run ended normally: the helper leaves without signalling anyone."""
        self._send("done\n")
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=2)

    def _send(self, text: str) -> None:
        if self._fd is None:
            return
        try:
            os.write(self._fd, text.encode())
        except OSError:  # the helper is gone (someone killed it): carry on without it
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
