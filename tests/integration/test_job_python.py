"""`trainprof run train.py` runs the script with the python a user would run it with.

GIVEN an active environment, THEN the script runs with its python (on PATH), and the report
names it and how to choose another; with none active, trainprof's own (it has torch). A job
that fails on a module its interpreter lacks, or on a trainprof option given after the
script, is told why.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_trainprof, write_script

pytestmark = pytest.mark.parallel  # judges no timing or load (CONTRIBUTING)

WHICH = """
import json, sys
print(json.dumps({"executable": sys.executable, "probe": "trainprof.probe" in sys.modules}))
"""


def _activated(bin_dir: Path) -> dict[str, str]:
    """The environment of a shell that activated the venv whose scripts are in ``bin_dir``."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    return {
        **env,
        "VIRTUAL_ENV": str(bin_dir.parent),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def test_a_script_runs_with_the_python_on_path(tmp_path: Path) -> None:
    # GIVEN an active environment whose `python` notes it ran, then runs this interpreter
    bin_dir = tmp_path / "user env" / "bin"
    bin_dir.mkdir(parents=True)
    used = tmp_path / "used.log"
    wrapper = bin_dir / "python"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> "{used}"\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    script = write_script(tmp_path, "which.py", WHICH)
    r = run_trainprof(tmp_path, str(script), env=_activated(bin_dir))
    assert r.returncode == 0, r.stderr[-2000:]
    # THEN the job ran with it, the probe loaded in it, and the report names it
    assert used.read_text().split() == [str(script)]
    assert '"probe": true' in r.stdout
    assert r.report is not None
    assert r.report["run"]["python"] == {"path": str(wrapper), "chosen": "PATH"}
    assert r.report["run"]["hint"] is None
    # AND with no environment active, trainprof's own Python (it has torch) runs it
    env = _activated(bin_dir)
    del env["VIRTUAL_ENV"]
    r = run_trainprof(tmp_path, str(script), env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert used.read_text().split() == [str(script)]  # not used again
    assert r.report is not None
    assert r.report["run"]["python"] == {"path": sys.executable, "chosen": "trainprof"}


def test_a_python_that_lacks_a_module_is_named(tmp_path: Path) -> None:
    # GIVEN a bare venv activated (no packages) and a script that imports torch
    pytest.importorskip("torch")
    venv = tmp_path / "bare env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    script = write_script(tmp_path, "needs_torch.py", "import torch\n")
    r = run_trainprof(tmp_path, str(script), env=_activated(venv / "bin"))
    # THEN the job failed on the import, and the report says whose Python lacks torch, that
    # trainprof's own has it, and how to run the script with that one
    assert r.returncode == 1
    assert r.report is not None
    run = r.report["run"]
    assert run["python"] == {"path": str(venv / "bin" / "python"), "chosen": "PATH"}
    hint = run["hint"]
    assert f"{venv / 'bin' / 'python'}, has no module 'torch'" in hint
    assert f"`trainprof run -- {shlex.quote(sys.executable)} needs_torch.py`" in hint
    assert "hint  the job's Python, " in r.stderr  # the console report says it too


ARGS = """
import argparse
parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.1)
parser.parse_args()
"""


def test_a_trainprof_option_after_the_script_is_said(tmp_path: Path) -> None:
    # GIVEN `trainprof run train.py --steps 50`: the script gets --steps, and argparse refuses it
    script = write_script(tmp_path, "train.py", ARGS)
    r = run_trainprof(tmp_path, str(script), "--steps", "50")
    assert r.returncode == 2
    assert "unrecognized arguments: --steps 50" in r.stderr
    # THEN the report says to put it before the script
    assert r.report is not None
    assert r.report["run"]["hint"] == (
        "`--steps 50` came after the script, so the script got it, not trainprof: put "
        "trainprof's options before the script (`trainprof run --steps 50 train.py`)"
    )
    # AND the script's own unknown option is no trainprof option: nothing is said of it
    r = run_trainprof(tmp_path, str(script), "--epochs", "3")
    assert r.returncode == 2 and r.report is not None
    assert r.report["run"]["hint"] is None
