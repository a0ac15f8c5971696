"""One step's FLOPs counted by torch's FlopCounterMode inside a real training job: the count is
the model's arithmetic, a gradient-accumulation step counts every micro-batch, the counted step
stays out of the statistics, and a CPU job is never counted unless asked (MFU is for GPUs; the
test asks, because this machine has no GPU)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import run_trainprof, write_script

from trainprof.store.schema import ENV_FLOPS

pytestmark = pytest.mark.parallel  # judges no timing or load (CONTRIBUTING)

SCRIPT = """
import torch
from torch import nn
model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10))
model.train()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
for _ in range(40):
    for _micro in range(2):  # gradient accumulation: two forwards and backwards a step
        nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    opt.zero_grad()
"""
# A matmul of (m×k)·(k×n) is 2mkn FLOPs. Forward: two Linears; backward: the weight gradients
# of both and the input gradient of the second (the input x needs none).
FWD = 2 * 64 * 256 * 512 + 2 * 64 * 512 * 10
BWD = 2 * 64 * 256 * 512 + 2 * (2 * 64 * 512 * 10)


def test_one_accumulation_step_is_counted_and_left_out(tmp_path: Path) -> None:
    script = str(write_script(tmp_path, "mlp.py", SCRIPT))
    env = dict(os.environ, **{ENV_FLOPS: "cpu"})
    r = run_trainprof(tmp_path, script, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.report is not None
    u = r.report["summary"]["mfu"]
    assert u["flops_per_step"] == 2 * (FWD + BWD)
    assert u["counted_step"] == 2 and u["failed_ops"] == 0
    assert u["peak_tflops"] is None and u["mfu"] is None  # a CPU has no entry in the peak table
    assert r.report["summary"]["warmup_steps_excluded"] >= 2

    plain = run_trainprof(tmp_path, script)
    assert plain.returncode == 0 and plain.report is not None
    assert plain.report["summary"]["mfu"] is None, "a CPU job is not counted"
