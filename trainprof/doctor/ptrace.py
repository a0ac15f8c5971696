"""Can `trainprof attach PID` read stacks? py-spy needs ptrace access to a process that is not
its child: Yama's ptrace_scope, CAP_SYS_PTRACE and container defaults decide.

Instead of only inferring it, the gatherer tries it: it starts a sleeping Python as its own
child and points ``py-spy dump`` (a sibling, not an ancestor) at it, which Yama scope 1 blocks
exactly as it would block attaching to an unrelated job. (`trainprof run` is unaffected: py-spy
is then the job's ancestor.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from trainprof.doctor.base import CheckResult, result

AREA = "attach"
CAP_SYS_PTRACE_BIT = 19
ATTACH_TIMEOUT_S = 10.0
SCOPE_MEANING = {
    0: "0 (classic: any process of the same user)",
    1: "1 (restricted: only descendants, unless CAP_SYS_PTRACE)",
    2: "2 (admin only: CAP_SYS_PTRACE required)",
    3: "3 (no attach at all, until reboot)",
}


@dataclass(frozen=True)
class PtraceInputs:
    py_spy: str | None
    ptrace_scope: int | None  # None: Yama not present
    euid: int
    cap_sys_ptrace: bool
    container: str | None  # what gave a container away, None when none seen
    attach_ok: bool | None  # None: the live test could not run
    attach_detail: str | None = None


def check_ptrace(inp: PtraceInputs) -> CheckResult:
    """py-spy present, and the live attach test (or, without it, the rules) allow attach."""
    if inp.py_spy is None:
        return result(
            AREA,
            "warn",
            "py-spy-missing",
            "py-spy not found: no stacks for `trainprof run` or `attach`",
            ("looked next to this Python and on PATH",),
            ("pip install py-spy",),
        )
    scope = (
        "absent (Yama not enabled)"
        if inp.ptrace_scope is None
        else SCOPE_MEANING.get(inp.ptrace_scope, str(inp.ptrace_scope))
    )
    evidence = [
        "py-spy next to this Python" if inp.py_spy == _beside_python() else f"py-spy {inp.py_spy}",
        f"kernel.yama.ptrace_scope {scope}",
        f"{'root' if inp.euid == 0 else f'uid {inp.euid}'}, "
        f"CAP_SYS_PTRACE {'yes' if inp.cap_sys_ptrace else 'no'}",
        f"container: {inp.container}" if inp.container else "container: none detected",
    ]
    if inp.attach_ok is True:
        return result(
            AREA,
            "ok",
            "ptrace-blocked",
            "py-spy can attach to a running job",
            [*evidence, "live test: py-spy dump of a non-child Python succeeded"],
        )
    blocked = inp.attach_ok is False
    if inp.attach_ok is None:
        # no live test: infer from the rules the kernel applies
        blocked = inp.ptrace_scope == 3 or (inp.ptrace_scope in (1, 2) and not inp.cap_sys_ptrace)
        evidence.append(f"live test not run: {inp.attach_detail or 'unknown reason'}")
    else:
        evidence.append(f"live test failed: {inp.attach_detail or 'py-spy dump failed'}")
    if not blocked:
        return result(AREA, "ok", "ptrace-blocked", "py-spy should be able to attach", evidence)
    return result(
        AREA,
        "warn",
        "ptrace-blocked",
        "`trainprof attach` cannot read stacks here",
        evidence,
        attach_fixes(inp),
    )


def attach_fixes(inp: PtraceInputs) -> list[str]:
    """The exact fixes, for a shell, Docker and Kubernetes; `trainprof attach` says the same
    when py-spy is refused. Never a bare "run it with sudo": a root attach to a job of another
    user is rarely what the user meant."""
    py_spy = inp.py_spy or "$(which py-spy)"
    shell = f"shell: sudo setcap cap_sys_ptrace+ep {py_spy}"
    if inp.ptrace_scope in (1, 2):
        shell += " (or, for every user of this host: sudo sysctl kernel.yama.ptrace_scope=0)"
    if inp.ptrace_scope == 3:
        shell = "shell: kernel.yama.ptrace_scope is 3: no process can attach until a reboot"
    return [
        shell,
        "Docker: docker run --cap-add SYS_PTRACE ... (restart the container with it)",
        "Kubernetes: securityContext: {capabilities: {add: [SYS_PTRACE]}} in the container spec",
        "or start the job with `trainprof run`, which needs no ptrace rights",
    ]


def _beside_python() -> str:
    return str(Path(sys.executable).parent / "py-spy")


def find_py_spy() -> str | None:
    """The py-spy installed with trainprof (next to this Python) first, then PATH."""
    here = _beside_python()
    if os.path.isfile(here) and os.access(here, os.X_OK):
        return here
    return shutil.which("py-spy")


def read_scope(path: Path = Path("/proc/sys/kernel/yama/ptrace_scope")) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def has_cap_sys_ptrace(status: Path = Path("/proc/self/status")) -> bool:
    try:
        for line in status.read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> CAP_SYS_PTRACE_BIT & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def detect_container(root: Path = Path("/")) -> str | None:
    for marker in (".dockerenv", "run/.containerenv"):
        if (root / marker).exists():
            return f"/{marker} present"
    try:
        cg = (root / "proc/1/cgroup").read_text()
    except OSError:
        return None
    for word in ("docker", "kubepods", "containerd", "libpod", "lxc"):
        if word in cg:
            return f"'{word}' in /proc/1/cgroup"
    return None


def attach_test(
    py_spy: str, timeout_s: float = ATTACH_TIMEOUT_S, runner: Sequence[str] = ()
) -> tuple[bool | None, str | None]:
    """py-spy dump of a sibling Python; (ok, first line of the error).

    ``runner`` prefixes the py-spy command (e.g. ``setpriv --reuid ...`` to try as another user).
    """
    try:
        target = subprocess.Popen(
            [sys.executable, "-S", "-c", "import time; print('ready', flush=True); time.sleep(30)"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
    except OSError as exc:
        return None, f"cannot start a target process: {exc}"
    try:
        assert target.stdout is not None
        target.stdout.readline()  # interpreter initialised: py-spy can find its state
        try:
            done = subprocess.run(
                [*runner, py_spy, "dump", "--pid", str(target.pid)],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired:
            return False, f"py-spy dump did not finish in {timeout_s:g} s"
        except OSError as exc:
            return None, f"cannot run py-spy: {exc}"
        if done.returncode == 0:
            return True, None
        lines = [ln.strip() for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
        return False, (lines[0][:200] if lines else f"exit status {done.returncode}")
    finally:
        target.kill()
        target.wait()


def gather_ptrace(live: bool = True) -> PtraceInputs:
    py_spy = find_py_spy()
    ok: bool | None = None
    detail: str | None = "py-spy missing" if py_spy is None else "disabled"
    if py_spy is not None and live:
        ok, detail = attach_test(py_spy)
    return ptrace_inputs(py_spy, ok, detail)


def ptrace_inputs(py_spy: str | None, attach_ok: bool | None, detail: str | None) -> PtraceInputs:
    """What the check judges: this machine's ptrace rules, and a live attach's outcome."""
    return PtraceInputs(
        py_spy=py_spy,
        ptrace_scope=read_scope(),
        euid=os.geteuid(),
        cap_sys_ptrace=has_cap_sys_ptrace(),
        container=detect_container(),
        attach_ok=attach_ok,
        attach_detail=detail,
    )
