"""One line where one line is enough: a script that never ran, a directory given as the
script, and a Ctrl-C that the shell made trainprof ignore."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import trainprof_cmd

pytestmark = [pytest.mark.slow, pytest.mark.parallel]  # judges no timing or load (CONTRIBUTING)

BROKEN = 'print("a"\nx = = 1\n'


def _tp(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        trainprof_cmd(*args), cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_a_script_that_does_not_compile_gets_pythons_error_and_one_line(tmp_path: Path) -> None:
    """Was: Python's SyntaxError, then a 20-line report panel and a run directory."""
    (tmp_path / "bad.py").write_text(BROKEN)
    plain = subprocess.run([sys.executable, "bad.py"], cwd=tmp_path, capture_output=True, text=True)
    p = _tp("run", "bad.py", cwd=tmp_path)
    assert p.returncode == plain.returncode == 1
    assert p.stderr.startswith(plain.stderr), p.stderr  # Python's own error, as it is
    ours = p.stderr[len(plain.stderr) :].splitlines()
    assert ours == [
        "trainprof: the script did not compile (SyntaxError, above): nothing ran to profile"
    ]
    assert not (tmp_path / "trainprof-runs").exists()  # no run directory left of it


def test_a_script_that_does_not_compile_keeps_what_was_asked_for(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text(BROKEN)
    p = _tp("run", "--run-dir", "run", "--json", "r.json", "bad.py", cwd=tmp_path)
    assert p.returncode == 1
    assert p.stderr.splitlines()[-1].startswith("trainprof: the script did not compile")
    assert "run directory:" in p.stderr.splitlines()[-1] and "╭" not in p.stderr
    assert json.loads((tmp_path / "r.json").read_text())["run"]["exit_code"] == 1


def test_a_module_that_does_not_compile_still_gets_its_report(tmp_path: Path) -> None:
    """The script ran (its import failed): the report, as for any failed job."""
    (tmp_path / "imp.py").write_text("import badmod\n")
    (tmp_path / "badmod.py").write_text("x = = 1\n")
    p = _tp("run", "-q", "--run-dir", "run", "imp.py", cwd=tmp_path)
    assert p.returncode == 1 and "trainprof report" in p.stderr and "╭" in p.stderr


def test_python_m_of_no_such_module_gets_one_line(tmp_path: Path) -> None:
    p = _tp("run", "--", sys.executable, "-m", "no_such_module_here", cwd=tmp_path)
    assert p.returncode == 1
    assert p.stderr.splitlines()[-2:] == [
        f"{sys.executable}: No module named no_such_module_here",
        "trainprof: its Python could not start it (No module named no_such_module_here): "
        "nothing ran to profile",
    ]


def test_a_directory_given_as_the_script_is_said_to_be_one(tmp_path: Path) -> None:
    """Was: `trainprof run runs` said "command not found: runs"."""
    (tmp_path / "runs").mkdir()
    for given in ("runs", "runs/"):
        p = _tp("run", given, cwd=tmp_path)
        assert p.returncode == 2
        assert p.stderr == (
            f"trainprof: {given} is a directory, not a script: give a script (runs/train.py) "
            "or `-- <command>`\n"
        )


def _stderr_on_a_terminal(cmd: list[str], cwd: Path, sigint_ignored: bool) -> tuple[int, str]:
    main, side = pty.openpty()

    def started() -> None:
        if sigint_ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)

    proc = subprocess.Popen(
        cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=side, preexec_fn=started
    )
    os.close(side)
    out = b""
    try:
        while chunk := os.read(main, 65536):
            out += chunk
    except OSError:  # EIO: the last writer closed the terminal
        pass
    finally:
        os.close(main)
    return proc.wait(timeout=120), out.decode(errors="replace")


@pytest.mark.parametrize("ignored", [True, False])
def test_a_ctrl_c_ignored_from_the_start_is_said(tmp_path: Path, ignored: bool) -> None:
    """Was: a Ctrl-C the shell made trainprof (and so the job) ignore did nothing, unsaid."""
    (tmp_path / "job.py").write_text("import sys\nprint('ran')\nsys.exit(3)\n")
    cmd = trainprof_cmd("run", "-q", "--no-stacks", "--run-dir", "run", "job.py")
    code, err = _stderr_on_a_terminal(cmd, tmp_path, ignored)
    assert code == 3
    said = "trainprof: Ctrl-C is ignored here (started with SIGINT ignored"
    assert (said in err) is ignored, err[-2000:]
