"""Real-GPU checks, run on a lent GPU machine; skipped where CUDA or NVML is missing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_trainprof, trainprof_cmd

from trainprof.examples.zoo import ZOO, script_path


def _cuda() -> bool:
    probe = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0


pytestmark = pytest.mark.skipif(not _cuda(), reason="no CUDA device")


def test_gpu_zoo_case_is_named_and_gpu_is_measured(tmp_path: Path) -> None:
    r = run_trainprof(tmp_path, str(script_path("gpu_fp32")), run_args=("--interval", "0.2"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.problems[0] == ZOO["gpu_fp32"].expect, r.report
    assert r.report["summary"]["gpu_util_mean"] is not None


def test_doctor_sees_the_gpu(tmp_path: Path) -> None:
    out = tmp_path / "doctor.json"
    subprocess.run(trainprof_cmd("doctor", "--json", str(out)), capture_output=True, text=True)
    checks = json.loads(out.read_text())["checks"]
    gpu = [c for c in checks if c["area"] == "gpu"]
    assert gpu and not any(c["title"].startswith("no NVIDIA") for c in gpu)
