"""The job's interpreter (interpreter.py): for a script, the python on PATH of an active
environment, or trainprof's own when it has torch and none is active; the Python a command
names; and the hints for a job that failed because of how it started."""

from __future__ import annotations

import importlib.util
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import trainprof
from trainprof.collect.interpreter import (
    ACTIVE_ENV,
    job_python,
    script_python,
    startup_hint,
)
from trainprof.collect.launcher import resolve_command
from trainprof.render.console import python_row


def _python_in(directory: Path, name: str = "python") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    exe = directory / name
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    return exe


@pytest.fixture
def no_active_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ACTIVE_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.usefixtures("no_active_env")
def test_an_active_environment_runs_the_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _python_in(tmp_path / "env" / "bin")
    monkeypatch.setenv("PATH", f"{first.parent}{os.pathsep}{os.environ['PATH']}")
    script = tmp_path / "train.py"
    script.write_text("")
    # GIVEN no active environment, and trainprof's own has torch: trainprof's own
    assert importlib.util.find_spec("torch") is not None, "this test needs torch here"
    assert resolve_command([str(script)]) == [sys.executable, str(script)]
    # GIVEN the environment activated (a venv's or conda's variable): its python on PATH
    for name in ACTIVE_ENV:
        monkeypatch.setenv(name, str(first.parent.parent))
        command = resolve_command([str(script), "--lr", "1"])
        assert command == [str(first), str(script), "--lr", "1"]
        assert job_python([str(script)], command) == {"path": str(first), "chosen": "PATH"}
        monkeypatch.delenv(name)


@pytest.mark.usefixtures("no_active_env")
def test_python3_when_no_python_and_trainprofs_own_when_neither(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VIRTUAL_ENV", str(tmp_path))
    only3 = _python_in(tmp_path / "a", "python3")
    monkeypatch.setenv("PATH", str(only3.parent))
    assert script_python() == (str(only3), "PATH")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert script_python() == (sys.executable, "trainprof")


def test_trainprof_without_torch_runs_the_python_on_path(tmp_path: Path) -> None:
    """trainprof in an environment of its own (pipx), with no environment active: the python
    on PATH. Its own environment is stood for by this Python without site-packages (-S)."""
    first = _python_in(tmp_path / "user env" / "bin")
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "from trainprof.collect.interpreter import script_python; print(list(script_python()))"
    )
    env = {k: v for k, v in os.environ.items() if k not in ACTIVE_ENV}
    env["PATH"] = f"{first.parent}{os.pathsep}{env.get('PATH', '')}"
    root = str(Path(trainprof.__file__).parent.parent)
    out = subprocess.run(
        [sys.executable, "-S", "-c", code, root], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str([str(first), "PATH"])


def test_a_named_python_is_the_commands_and_another_program_has_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    named = _python_in(tmp_path / "b", "python3.11")
    monkeypatch.setenv("PATH", f"{named.parent}{os.pathsep}{os.environ['PATH']}")
    given = ["python3.11", "train.py"]
    assert job_python(given, given) == {"path": str(named), "chosen": "command"}
    assert job_python(["torchrun", "train.py"], ["torchrun", "train.py"]) is None


def test_the_header_line_says_why_and_how_to_choose_another() -> None:
    line = python_row({"path": "/env/bin/python", "chosen": "PATH"})
    assert line.startswith("/env/bin/python (the python on PATH;")
    assert "`trainprof run -- /path/to/python train.py`" in line
    assert "(the Python trainprof runs on;" in python_row(
        {"path": "/x/python", "chosen": "trainprof"}
    )
    assert python_row({"path": "/x/python", "chosen": "command"}) == "/x/python"


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
    assert hint is not None and f"`trainprof run -- {shlex.quote(sys.executable)} train.py`" in hint
    # another error, or a success, says nothing
    assert startup_hint(_failed("ValueError", "No module named 'x'", "/e/py"), "") is None
    assert startup_hint({**meta, "exit_code": 0}, "") is None


def run_options() -> frozenset[str]:
    """The option names `trainprof run` passes to the runner, read from the CLI."""
    import typer

    from trainprof.cli import app
    from trainprof.commands.options import option_names

    command = typer.main.get_command(app).get_command(None, "run")  # type: ignore[attr-defined]
    return option_names(typer.Context(command))


def test_only_trainprofs_own_options_after_the_script_are_said() -> None:
    own = run_options()
    meta = {"exit_code": 2, "command": ["python", "t.py", "--timeout=30", "--lr", "1"]}
    tail = "usage: t.py [-h]\nt.py: error: unrecognized arguments: --timeout=30 --lr 1\n"
    hint = startup_hint(meta, tail, own)
    assert hint is not None and "(`trainprof run --timeout=30 t.py`)" in hint
    click_tail = "Usage: t.py [OPTIONS]\nTry 't.py --help' for help.\n\nError: No such option: -q\n"
    assert startup_hint({**meta, "command": ["python", "t.py", "-q"]}, click_tail, own) is not None
    assert startup_hint(meta, "t.py: error: unrecognized arguments: --lr 1\n", own) is None
    assert {"--steps", "--timeout", "-q", "--json"} <= own
