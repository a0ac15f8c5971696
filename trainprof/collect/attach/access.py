"""Can py-spy read this process's stacks? One ``py-spy dump --nonblocking`` answers before any
sampling starts; when the kernel refuses, the message names the same facts and fixes as
`trainprof doctor`'s attach check (``doctor/ptrace.py``), and never a py-spy traceback."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence

from trainprof.collect.samplers.pyspy import py_spy_path
from trainprof.doctor.ptrace import (
    SCOPE_MEANING,
    PtraceInputs,
    attach_fixes,
    ptrace_inputs,
)
from trainprof.errors import TrainprofError

DUMP_TIMEOUT_S = 20.0
# A non-blocking dump of a hot pure-Python loop fails ~1 time in 8 here on a quiet machine (the
# frames change under the read), more on a loaded one: 3 tries once all failed in a CI run.
DUMP_TRIES = 10
RETRY_PAUSE_S = 0.02
_DENIED = ("permission denied", "operation not permitted", "os error 1)", "os error 13)")


def gather(py_spy: str | None) -> PtraceInputs:
    """The inputs doctor's check judges, read here (without its live test: the dump is ours)."""
    return ptrace_inputs(py_spy, attach_ok=False, detail=None)


def denied_message(pid: int, detail: str, inp: PtraceInputs) -> str:
    """One line: why py-spy was refused, what decides it here, and the exact fixes."""
    scope = (
        "Yama absent"
        if inp.ptrace_scope is None
        else f"kernel.yama.ptrace_scope {SCOPE_MEANING.get(inp.ptrace_scope, inp.ptrace_scope)}"
    )
    who = "root" if inp.euid == 0 else f"uid {inp.euid}"
    cap = "with" if inp.cap_sys_ptrace else "without"
    facts = f"{scope}; {who} {cap} CAP_SYS_PTRACE"
    if inp.container:
        facts += f"; in a container ({inp.container})"
    return (
        f"cannot read the stacks of pid {pid}: the kernel refused ptrace ({detail}); {facts}. "
        f"Fix: {'; '.join(attach_fixes(inp))}. `trainprof doctor` checks this too"
    )


def check(pid: int, runner: Sequence[str] = ()) -> str:
    """py-spy's path, once a dump of ``pid`` succeeded; TrainprofError otherwise. ``runner``
    prefixes the dump (``setpriv --reuid ...``: the same dump as another user, in tests)."""
    exe = py_spy_path()
    if exe is None:
        raise TrainprofError(
            "py-spy not found: pip install py-spy (trainprof attach reads stacks with it)"
        )
    detail = "py-spy failed"
    for _try in range(DUMP_TRIES):
        try:
            done = subprocess.run(
                [*runner, exe, "dump", "--pid", str(pid), "--nonblocking"],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=DUMP_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            raise TrainprofError(
                f"py-spy did not answer within {DUMP_TIMEOUT_S:g} s for pid {pid}"
            ) from None
        except OSError as exc:
            raise TrainprofError(f"cannot run py-spy ({exe}): {exc.strerror}") from None
        if done.returncode == 0:
            return exe
        detail = first_error(done.stderr + "\n" + done.stdout)
        if any(word in detail.lower() for word in _DENIED):
            # py-spy's own advice is to re-run under sudo: never passed on
            raise TrainprofError(denied_message(pid, "permission denied", gather(exe)))
        # else: a non-blocking read can catch the stacks mid-change ("Failed to get stack
        # traces"); another try, a moment later, usually reads them
        time.sleep(RETRY_PAUSE_S)
    raise TrainprofError(f"py-spy cannot read the Python stacks of pid {pid}: {detail}")


def first_error(text: str) -> str:
    """py-spy's own message, without its Rust backtrace."""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("Stack backtrace", "py-spy>")) or line[:1].isdigit():
            continue
        return line.removeprefix("Error: ")[:200]
    return "py-spy failed"
