"""How the job ended, as what it recorded says: the exception that ended its main process, and
whether a signal killed it only as Python shut down."""

from __future__ import annotations

import re
from typing import Any

from trainprof.store.events import ProcessLog
from trainprof.store.session import Session

_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)): ?(.*)$")


def _main_logs(session: Session) -> list[ProcessLog]:
    """What the job's main process recorded (nothing when it ran no probe: a shell wrapper)."""
    return [p for p in session.processes if p.pid == session.meta.get("pid")]


def killed_at_shutdown(session: Session) -> bool | None:
    """Whether the signal that killed the job's main process came after its script ended (its
    probe's exit handler, the last one, had run) with no exception: only the interpreter's
    shutdown failed, and every record was written. A script ended by an uncaught
    KeyboardInterrupt is not one: Python kills itself with SIGINT after its exit handlers, so
    the shell sees the interrupt. None when no signal killed it, or nothing was recorded from its
    main process (a shell wrapper, a launcher, a script killed before its first record)."""
    main = _main_logs(session)
    if not session.meta.get("signal") or not main:
        return None
    return any(p.reached_exit and not any("exception" in i for i in p.infos) for p in main)


def job_exception(session: Session) -> dict[str, Any] | None:
    """The exception that ended the job's main process (``{"type", "message"}``), as its probe
    recorded it, or else the last line of a traceback in its stderr when it failed."""
    main = _main_logs(session)
    for p in main or [p for p in session.processes if p.role != "worker"]:
        for info in reversed(p.infos):
            if "exception" in info:
                return {"type": info["exception"], "message": info.get("message", "")}
    if session.meta.get("exit_code") in (0, None):
        return None
    for line in reversed(session.stderr_tail.splitlines()[-20:]):
        m = _EXCEPTION_LINE.match(line.strip())
        if m:
            return {"type": m.group(1), "message": m.group(2)}
    return None


def headline(message: str) -> tuple[str, int]:
    """A message's first non-blank line, and how many non-blank lines follow it: a multi-line
    exception message shown in one row."""
    lines = [line.strip() for line in str(message).splitlines() if line.strip()]
    return (lines[0], len(lines) - 1) if lines else ("", 0)
