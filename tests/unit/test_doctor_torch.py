"""torch-missing / launch-blocking: the probe runs in real subprocesses.

"Missing" is a real interpreter without site-packages (``python -S``); "broken" is a real
``torch`` package on PYTHONPATH whose import raises, as a torch with missing CUDA libraries does.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import sys
from pathlib import Path

import pytest

from trainprof.doctor.torch_env import (
    TorchProbe,
    check_launch_blocking,
    check_torch,
    parse_probe,
)

HAS_TORCH = importlib.util.find_spec("torch") is not None


def shadow_torch(tmp_path: Path, body: str) -> dict[str, str]:
    """An environment whose PYTHONPATH puts a fake ``torch`` package first."""
    pkg = tmp_path / "shadow" / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(body)
    return {**os.environ, "PYTHONPATH": str(tmp_path / "shadow")}


@pytest.mark.skipif(not HAS_TORCH, reason="torch not installed in this venv")
def test_real_torch_in_this_venv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the doctor started from a directory holding a ./torch folder (e.g. a source tree)
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise RuntimeError('cwd shadow')\n")
    monkeypatch.chdir(tmp_path)
    facts = TorchProbe().result()
    # THEN the installed torch is probed, not the folder
    assert facts.state == "ok", facts.error
    assert facts.version == importlib.metadata.version("torch")
    assert facts.num_threads and facts.num_threads >= 1
    assert facts.sharing_strategy in ("file_descriptor", "file_system")
    assert facts.start_method in ("fork", "spawn", "forkserver")
    assert isinstance(facts.cuda_available, bool)
    r = check_torch(facts)
    assert (r.status, r.finding.id, r.finding.title) == (
        "ok",
        "torch-missing",
        f"torch {facts.version}",
    )


def test_interpreter_without_torch_is_a_warning() -> None:
    facts = TorchProbe((sys.executable, "-S")).result()
    assert facts.state == "missing"
    assert facts.error and "No module named 'torch'" in facts.error
    r = check_torch(facts)
    assert (r.status, r.finding.severity) == ("warn", "warning")
    assert r.finding.title == "torch is not installed for this Python"
    assert any("pip install torch" in f for f in r.finding.fix)


def test_torch_whose_import_raises_importerror_fails(tmp_path: Path) -> None:
    env = shadow_torch(
        tmp_path, "raise ImportError('libtorch_cuda.so: cannot open shared object file')\n"
    )
    facts = TorchProbe(env=env).result()
    assert facts.state == "broken"
    r = check_torch(facts)
    assert (r.status, r.finding.severity) == ("fail", "error")
    assert any("libtorch_cuda.so" in e for e in r.finding.evidence)


def test_interpreter_dying_during_import_fails_without_traceback(tmp_path: Path) -> None:
    env = shadow_torch(
        tmp_path, "import os, sys\nsys.stderr.write('Illegal instruction\\n')\nos._exit(132)\n"
    )
    facts = TorchProbe(env=env).result()
    assert facts.state == "broken"
    assert facts.error == "probe died: Illegal instruction"


def test_hanging_import_times_out(tmp_path: Path) -> None:
    env = shadow_torch(tmp_path, "import time\ntime.sleep(30)\n")
    facts = TorchProbe(env=env, timeout_s=0.5).result()
    assert facts.state == "broken" and facts.error and "did not finish in 0.5 s" in facts.error


def test_unstartable_interpreter() -> None:
    facts = TorchProbe(("/nonexistent/python",)).result()
    assert facts.state == "broken" and facts.error and "cannot start" in facts.error


def test_parse_ignores_torch_chatter_before_the_marker() -> None:
    out = 'warning from torch\nTRAINPROF_TORCH_PROBE {"state": "ok", "version": "2.4.0", "cuda_build": "12.4"}\n'
    facts = parse_probe(out, "", "python", 0)
    assert (facts.state, facts.version, facts.cuda_build) == ("ok", "2.4.0", "12.4")


def test_launch_blocking() -> None:
    assert check_launch_blocking({}).status == "ok"
    assert check_launch_blocking({"CUDA_LAUNCH_BLOCKING": "0"}).status == "ok"
    r = check_launch_blocking({"CUDA_LAUNCH_BLOCKING": "1"})
    assert (r.status, r.finding.id) == ("warn", "launch-blocking")
    assert r.finding.fix == ("unset CUDA_LAUNCH_BLOCKING",)
