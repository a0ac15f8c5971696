"""py-spy ``dump`` text, as the hang watch stores it (``=== pid N (name) ===`` then the dump),
parsed into processes, threads and frames (innermost first, as py-spy prints them)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from trainprof.store.stacks import Frame

_PROC = re.compile(r"^=== pid (\d+) \((.*)\) ===$")
# py-spy's thread states: "idle", "active", and "active+gil" (running, holding the GIL)
_THREAD = re.compile(r'^Thread (?:0x)?[0-9a-fA-F]+ \(([\w+]+)\)(?:: "(.*)")?')
_FRAME = re.compile(r"^\s+(.+?) \((.+):(\d+)\)$")


@dataclass(frozen=True)
class ThreadDump:
    name: str
    idle: bool
    frames: tuple[Frame, ...]  # innermost first


@dataclass(frozen=True)
class ProcessDump:
    pid: int
    name: str
    threads: tuple[ThreadDump, ...]
    error: str | None  # py-spy could not read it (the process is gone, say)

    @property
    def main(self) -> ThreadDump | None:
        """The main thread (py-spy lists it first; by name when it says so)."""
        for t in self.threads:
            if t.name == "MainThread":
                return t
        return self.threads[0] if self.threads else None


def parse(text: str) -> list[ProcessDump]:
    out: list[ProcessDump] = []
    pid, name = -1, ""
    threads: list[ThreadDump] = []
    current: tuple[str, bool, list[Frame]] | None = None
    lines_seen: list[str] = []

    def close_thread() -> None:
        nonlocal current
        if current is not None:
            threads.append(ThreadDump(current[0], current[1], tuple(current[2])))
            current = None

    def close_proc() -> None:
        close_thread()
        if pid >= 0:
            error = None if threads else (" ".join(lines_seen).strip()[:300] or "no stacks")
            out.append(ProcessDump(pid, name, tuple(threads), error))

    for line in text.splitlines():
        m = _PROC.match(line)
        if m:
            close_proc()
            pid, name = int(m.group(1)), m.group(2)
            threads, lines_seen = [], []
            continue
        m = _THREAD.match(line)
        if m:
            close_thread()
            current = (m.group(2) or "", m.group(1) == "idle", [])
            continue
        m = _FRAME.match(line)
        if m and current is not None:
            current[2].append((m.group(1), m.group(2), int(m.group(3))))
            continue
        if current is None and line.strip() and not line.startswith(("Process ", "Python v")):
            lines_seen.append(line.strip())
    close_proc()
    return out
