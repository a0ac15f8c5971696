"""Real-GPU checks, run on a lent GPU machine; skipped where CUDA or NVML is missing. (The zoo's
cases, their GPU utilization among them, are tests/gpu/test_gpu_zoo.py's.)"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import trainprof_cmd
from gpu_helpers import cuda_available

pytestmark = pytest.mark.skipif(not cuda_available(), reason="no CUDA device")


def test_doctor_sees_the_gpu(tmp_path: Path) -> None:
    out = tmp_path / "doctor.json"
    subprocess.run(trainprof_cmd("doctor", "--json", str(out)), capture_output=True, text=True)
    checks = json.loads(out.read_text())["checks"]
    gpu = [c for c in checks if c["area"] == "gpu"]
    assert gpu and not any(c["title"].startswith("no NVIDIA") for c in gpu)
