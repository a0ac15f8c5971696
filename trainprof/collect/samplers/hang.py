"""When the job stops making progress: dump the Python stacks of the main process and every
DataLoader worker (py-spy dump, nonblocking) into the run directory."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import psutil

from trainprof.analysis.attribution import is_compiling
from trainprof.collect.samplers.proctree import process_tree
from trainprof.collect.samplers.pyspy import py_spy_path
from trainprof.store.dumps import parse
from trainprof.store.redact import redact
from trainprof.store.rundir import write_private_text

HANG_STACKS = "hang-stacks.txt"
MAX_INLINE = 64 * 1024  # stacks kept in run.json when the file cannot be written


def dump_stacks(root_pid: int, run_dir: Path, redact_argv: bool = True) -> dict[str, Any]:
    exe = py_spy_path()
    procs = process_tree(root_pid)
    out: list[str] = []
    main_stack: str | None = None
    python_procs = 0
    for proc in procs:
        text = dump_one(exe, proc.pid) if exe else "py-spy not found"
        if redact_argv:
            text = _redact_process_line(text)
        if "Thread" in text:
            python_procs += 1
        out.append(f"=== pid {proc.pid} ({_name(proc)}) ===\n{text}\n")
        if main_stack is None and "Thread" in text:
            main_stack = _innermost(text)
    text = "".join(out)
    path = run_dir / HANG_STACKS
    try:
        write_private_text(path, text)
        stored: str | None = HANG_STACKS
    except OSError:  # a full disk: the stacks travel in run.json instead (bounded)
        stored = None
    dumps = parse(text)
    main = next((d.main for d in dumps if d.main is not None), None)
    return {
        "stacks_file": stored,
        "stacks_text": text[:MAX_INLINE] if stored is None else None,
        "processes": len(procs),
        "workers": max(0, python_procs - 1),
        "main_stack": main_stack,
        # torch.compile compiling for longer than the silence limit: progress, not a hang.
        "compiling": bool(main and is_compiling(tuple(reversed(main.frames)))),
    }


def dump_one(exe: str, pid: int) -> str:
    """``py-spy dump`` of one process, as text (the error instead, when it fails)."""
    try:
        r = subprocess.run(
            [exe, "dump", "--pid", str(pid), "--nonblocking", "--full-filenames"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return (r.stdout + r.stderr).strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"py-spy dump failed: {exc}"


def _redact_process_line(dump: str) -> str:
    """py-spy's first line is ``Process PID: <command line>``: mask its secrets as run.json's."""
    lines = dump.split("\n")
    for i, line in enumerate(lines[:3]):
        head, sep, cmdline = line.partition(": ")
        if line.startswith("Process ") and sep:
            lines[i] = head + sep + " ".join(redact(cmdline.split(" ")))
    return "\n".join(lines)


def _name(proc: psutil.Process) -> str:
    try:
        return proc.name()
    except psutil.Error:
        return "?"


def _innermost(dump: str) -> str | None:
    """The first frame of the first thread in py-spy's dump (innermost first)."""
    lines = dump.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Thread"):
            for frame in lines[i + 1 : i + 4]:
                if frame.strip():
                    return frame.strip()
    return None
