"""The job's interpreter (interpreter.py): the python on PATH for a script, else trainprof's own;
the Python a command names; and the hints for a job that failed because of how it started."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from trainprof.interpreter import describe, job_python, own_options, script_python, startup_hint
from trainprof.launcher import resolve_command


def _python_in(directory: Path, name: str = "python") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    exe = directory / name
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    return exe


def test_a_script_gets_the_python_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = _python_in(tmp_path / "env" / "bin")
    monkeypatch.setenv("PATH", f"{first.parent}{os.pathsep}{os.environ['PATH']}")
    script = tmp_path / "train.py"
    script.write_text("")
    command = resolve_command([str(script), "--lr", "1"])
    assert command == [str(first), str(script), "--lr", "1"]
    assert job_python([str(script)], command) == {"path": str(first), "chosen": "PATH"}


def test_python3_when_no_python_and_trainprofs_own_when_neither(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    only3 = _python_in(tmp_path / "a", "python3")
    monkeypatch.setenv("PATH", str(only3.parent))
    assert script_python() == (str(only3), "PATH")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert script_python() == (sys.executable, "trainprof")


def test_a_named_python_is_the_commands_and_another_program_has_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    named = _python_in(tmp_path / "b", "python3.11")
    monkeypatch.setenv("PATH", f"{named.parent}{os.pathsep}{os.environ['PATH']}")
    given = ["python3.11", "train.py"]
    assert job_python(given, given) == {"path": str(named), "chosen": "command"}
    assert job_python(["torchrun", "train.py"], ["torchrun", "train.py"]) is None


def test_the_header_line_says_why_and_how_to_choose_another() -> None:
    line = describe({"path": "/env/bin/python", "chosen": "PATH"})
    assert line.startswith("/env/bin/python (the python on PATH;")
    assert "`trainprof run -- /path/to/python train.py`" in line
    assert "no python on PATH" in describe({"path": "/x/python", "chosen": "trainprof"})
    assert describe({"path": "/x/python", "chosen": "command"}) == "/x/python"


def _failed(exc_type: str, message: str, path: str) -> dict[str, object]:
    return {
        "exit_code": 1,
        "command": ["python", "train.py"],
        "exception": {"type": exc_type, "message": message},
        "python": {"path": path, "chosen": "PATH"},
    }


def test_a_missing_module_names_the_interpreter() -> None:
    meta = _failed("ModuleNotFoundError", "No module named 'no_such_pkg.sub'", "/env/bin/python")
    hint = startup_hint(meta, "")
    assert hint is not None
    assert hint.startswith("the job's Python, /env/bin/python, has no module 'no_such_pkg'")
    assert f"nor has trainprof's own ({sys.executable})" in hint
    # pytest is in trainprof's environment: then its Python is offered
    hint = startup_hint(_failed("ModuleNotFoundError", "No module named 'pytest'", "/e/py"), "")
    assert hint is not None and f"`trainprof run -- {sys.executable} train.py`" in hint
    # another error, or a success, says nothing
    assert startup_hint(_failed("ValueError", "No module named 'x'", "/e/py"), "") is None
    assert startup_hint({**meta, "exit_code": 0}, "") is None


def test_only_trainprofs_own_options_after_the_script_are_said() -> None:
    meta = {"exit_code": 2, "command": ["python", "t.py", "--timeout=30", "--lr", "1"]}
    tail = "usage: t.py [-h]\nt.py: error: unrecognized arguments: --timeout=30 --lr 1\n"
    hint = startup_hint(meta, tail)
    assert hint is not None and "(`trainprof run --timeout=30 t.py`)" in hint
    click_tail = "Usage: t.py [OPTIONS]\nTry 't.py --help' for help.\n\nError: No such option: -q\n"
    assert startup_hint({**meta, "command": ["python", "t.py", "-q"]}, click_tail) is not None
    assert startup_hint(meta, "t.py: error: unrecognized arguments: --lr 1\n") is None
    assert {"--steps", "--timeout", "-q", "--max-data-wait"} <= own_options()
