"""A job that trains on ``cuda:1`` without ``torch.cuda.set_device`` keeps device 0 as its
current device. The probe's device timeline must record its events on cuda:1 (the GPU that
works) and must not create a CUDA context on GPU 0 (hundreds of MB there, in every rank of such
a job); the report's utilization is GPU 1's. Needs two GPUs: skipped on a one-GPU machine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_trainprof, write_script
from gpu_helpers import cuda_devices, gpu_env, keep

pytestmark = pytest.mark.skipif(cuda_devices() < 2, reason="needs two CUDA devices")

ON_GPU_1 = """
import os

import pynvml
import torch
from torch import nn

dev = torch.device("cuda:1")
model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 10)).to(dev)
opt = torch.optim.AdamW(model.parameters())
x = torch.randn(512, 1024, device=dev)
y = torch.randint(0, 10, (512,), device=dev)
for _ in range(400):
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
torch.cuda.synchronize(dev)
pynvml.nvmlInit()
visible = os.environ.get("CUDA_VISIBLE_DEVICES")
gpu0 = pynvml.nvmlDeviceGetHandleByIndex(int(visible.split(",")[0]) if visible else 0)
pids = {p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(gpu0)}
print("CONTEXT ON GPU 0:", os.getpid() in pids)
"""


def test_a_job_on_cuda_1_is_timed_there_and_gets_no_context_on_gpu_0(tmp_path: Path) -> None:
    script = write_script(tmp_path, "on_gpu_1.py", ON_GPU_1)
    plain = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=180, env=gpu_env()
    )
    assert plain.returncode == 0, plain.stderr[-3000:]
    if "CONTEXT ON GPU 0: True" in plain.stdout:
        pytest.skip("this torch creates a context on GPU 0 by itself")
    r = run_trainprof(tmp_path, str(script), env=gpu_env(), timeout=180)
    keep("second_gpu", r)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "CONTEXT ON GPU 0: False" in r.stdout, r.stdout[-2000:]
    assert r.report is not None and r.report.get("device") is not None, r.stdout[-3000:]
    gpus = r.report["summary"]["gpus"]
    assert gpus is not None and gpus["by"] == "uuid" and len(gpus["indices"]) == 1, gpus
