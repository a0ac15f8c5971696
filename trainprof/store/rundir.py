"""The run directory: created private (0700), never through a pre-existing symlink."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

from trainprof.errors import TrainprofError

RUNS_DIR = "trainprof-runs"
META = "run.json"
SAMPLES = "samples.jsonl"
REPORT = "report.json"
STDOUT_LOG = "stdout.log"
STDERR_LOG = "stderr.log"


def default_run_dir(command: list[str], base: Path | None = None) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    label = _label(command)
    return (base or Path.cwd() / RUNS_DIR) / f"{stamp}-{label}"


def _label(command: list[str]) -> str:
    """A short name for the job: the script's stem, the module after -m, or the program."""
    words = [w for w in command[1:] if not w.startswith("-")] if len(command) > 1 else []
    if "-m" in command:
        i = command.index("-m")
        if i + 1 < len(command):
            return _slug(command[i + 1])
    for w in words:
        if w.endswith(".py"):
            return _slug(Path(w).stem)
    return _slug(Path(command[0]).name if command else "job")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:40] or "job"


def create(path: Path, explicit: bool) -> Path:
    """Make the run directory. A default name that is taken gets a numeric suffix; an explicit
    ``--run-dir`` must be new or an empty real directory."""
    path = path.absolute()
    path.parent.mkdir(parents=True, exist_ok=True)
    if explicit:
        if path.is_symlink():
            raise TrainprofError(f"--run-dir {path} is a symlink; give a real directory")
        if path.exists():
            if not path.is_dir() or any(path.iterdir()):
                raise TrainprofError(f"--run-dir {path} exists and is not an empty directory")
            os.chmod(path, 0o700)
            return path
        os.mkdir(path, 0o700)
        return path
    for i in range(1000):
        candidate = path if i == 0 else path.with_name(f"{path.name}-{i}")
        try:
            os.mkdir(candidate, 0o700)  # mkdir never follows a symlink at the final component
            return candidate
        except FileExistsError:
            continue
    raise TrainprofError(f"could not create a run directory next to {path}")


def write_json(path: Path, data: Any) -> None:
    """Write a file inside the run directory without following a symlink planted there."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, default=str)
        f.write("\n")


def read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def open_private(path: Path, mode: str = "w") -> Any:
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    flags |= os.O_APPEND if "a" in mode else os.O_TRUNC
    fd = os.open(path, flags, 0o600)
    return os.fdopen(fd, mode.replace("b", "") + "b", buffering=0)
