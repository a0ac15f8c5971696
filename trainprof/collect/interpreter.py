"""The Python a script runs with: the one the user would run it with, as ``python train.py``.

That is the ``python`` on PATH when an environment is active (a venv, conda) or when
trainprof's own environment has no torch (trainprof in an environment of its own, as pipx
installs it). With no environment active, trainprof's own Python when it has torch (a venv's
``bin/trainprof`` called by its path, ``make demo``), and when no python is on PATH. Also
here: what to say when the job failed because of how it was started (a module its
interpreter lacks, a trainprof option given after the script).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import sys
from collections.abc import Collection
from pathlib import Path
from typing import Any

PATH_NAMES = ("python", "python3")  # in this order, as a user would type them
_PYTHON = re.compile(r"python[0-9.]*$")
CHOOSE = "trainprof run -- /path/to/python {script}"
_UNRECOGNIZED = re.compile(
    r"^(?:\S+: error: unrecognized arguments: (?P<argparse>.+)"
    r"|Error: No such option: (?P<click>\S+))$"
)


ACTIVE_ENV = ("VIRTUAL_ENV", "CONDA_PREFIX")  # set by `activate`, `conda activate`


def script_python() -> tuple[str, str]:
    """(the interpreter for a script, how it was chosen: ``PATH``, or ``trainprof`` for
    trainprof's own), by the rules in this module's docstring."""
    active = any(os.environ.get(name) for name in ACTIVE_ENV)
    if active or not _has_module("torch"):
        for name in PATH_NAMES:
            found = shutil.which(name)
            if found:
                return os.path.abspath(found), "PATH"
    return sys.executable, "trainprof"


def job_python(given: list[str], command: list[str]) -> dict[str, str] | None:
    """The job's interpreter as run facts (``{"path", "chosen"}``): a script's, or the Python
    the command names (``chosen``: ``command``); None for any other program."""
    if not given or not command:
        return None
    if given[0].endswith(".py"):  # resolve_command put script_python() first
        return {"path": command[0], "chosen": script_python()[1]}
    if _PYTHON.match(Path(command[0]).name):
        found = command[0] if os.sep in command[0] else shutil.which(command[0])
        return {"path": os.path.abspath(found or command[0]), "chosen": "command"}
    return None


def startup_hint(
    meta: dict[str, Any],
    stderr_tail: str,
    options: Collection[str] = (),
) -> str | None:
    """Why a failed job may have failed because of how it was started, or None: a module its
    interpreter lacks, or one of trainprof's ``options`` (its option names) given after the script."""
    if meta.get("exit_code") in (0, None):
        return None
    return _missing_module(meta) or _option_after_script(meta, stderr_tail, options)


def _missing_module(meta: dict[str, Any]) -> str | None:
    exc = meta.get("exception") or {}
    python = meta.get("python")
    if exc.get("type") != "ModuleNotFoundError" or not isinstance(python, dict):
        return None
    m = re.match(r"No module named '([^']+)'", str(exc.get("message", "")))
    if not m:
        return None
    module = m.group(1).split(".")[0]
    path = str(python.get("path"))
    script = _script(meta)
    said = f"the job's Python, {path}, has no module {module!r}"
    if python.get("chosen") == "PATH":
        said += " (it is the python on PATH)"
    own = os.path.abspath(sys.executable)
    if path == own:  # not by the resolved path: every venv's python links to one interpreter
        return (
            f"{said}; it is trainprof's own Python. Install {module} there, activate the "
            f"environment the script needs, or name its Python: `{CHOOSE.format(script=script)}`"
        )
    if _has_module(module):
        return (
            f"{said}; trainprof's own Python has it: activate the environment the script needs, "
            f"or name its Python: `trainprof run -- {shlex.quote(own)} {shlex.quote(script)}`"
        )
    return (
        f"{said}, nor has trainprof's own ({own}): activate the environment the script needs, "
        f"or name its Python: `{CHOOSE.format(script=script)}`"
    )


def _option_after_script(
    meta: dict[str, Any], stderr_tail: str, options: Collection[str]
) -> str | None:
    """An argparse (or click) error on an option of trainprof's given after the script."""
    command = [str(a) for a in meta.get("command") or []]
    for line in reversed(stderr_tail.splitlines()[-20:]):
        m = _UNRECOGNIZED.match(line.strip())
        if not m:
            continue
        words = (m.group("argparse") or m.group("click") or "").split()
        ours = [w for w in words if w.split("=", 1)[0] in options]
        if not ours:
            return None
        option = ours[0]
        value = _value_after(command, option)
        given = f"{option} {value}" if value is not None else option
        return (
            f"`{given}` came after the script, so the script got it, not trainprof: put "
            f"trainprof's options before the script (`trainprof run {given} {_script(meta)}`)"
        )
    return None


def _value_after(command: list[str], option: str) -> str | None:
    if "=" in option or option not in command:
        return None
    i = command.index(option)
    after = command[i + 1] if i + 1 < len(command) else None
    return after if after is not None and not after.startswith("-") else None


def _script(meta: dict[str, Any]) -> str:
    """The script's name as the user gave it (the command's first ``.py`` word), else train.py."""
    command = [str(a) for a in meta.get("command") or []]
    return next((Path(a).name for a in command if a.endswith(".py")), "train.py")


def _has_module(name: str) -> bool:
    """Whether trainprof's own environment can import ``name`` (found, not imported)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False
