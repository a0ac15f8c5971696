"""A job that compiles its optimizer step (PyTorch's "compiled optimizer" recipe) under the
probe, with the device timeline on stand-in events (this machine has no CUDA): Dynamo traces
``Optimizer.step``'s wrapper, which runs torch's global step hooks, the probe's among them.
The probe's package is one of Dynamo's skip directories once the job imports Dynamo, so the
job's stderr carries no Dynamo warning about the probe's code (it did: "Dynamo does not know
how to trace the builtin time.monotonic", and sys._getframe), and its pre-step hook, in for
timed steps only and always under one key, leaves nothing to compile again once warm."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_reporting_job

pytestmark = pytest.mark.parallel  # judges no timing or load (CONTRIBUTING)

JOB = """
import json, sys
import torch
from torch import nn
from torch._dynamo.utils import counters
from trainprof.probe import device_marks
from trainprof.probe.state import state
from stand_in_timeline import use_stand_in_timeline

use_stand_in_timeline(every_stride_step=True)
torch.manual_seed(0)
model = nn.Linear(16, 4)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

@torch.compile(fullgraph=False)
def opt_step():
    opt.step()

def steps(n):
    for _ in range(n):
        model(torch.randn(8, 16)).pow(2).mean().backward()
        opt_step()
        opt.zero_grad()

steps(1)
device_marks.start_timeline(torch, torch.device("cpu"))  # what a CUDA job's first step starts
steps(60)
warm = counters["frames"]["total"]
timed = state.timeline.step
steps(120)
out = {"frames_warm": warm, "frames_end": counters["frames"]["total"],
       "timeline_steps": state.timeline.step - timed}
with open(sys.argv[1], "w") as f:
    json.dump(out, f)
"""


def test_a_compiled_optimizer_step_compiles_no_more_once_warm(tmp_path: Path) -> None:
    r, seen = run_reporting_job(tmp_path, "compiled_step.py", JOB, timeout=300)
    assert seen["timeline_steps"] == 120, seen  # the probe's hooks ran on every step
    assert seen["frames_end"] == seen["frames_warm"], seen
    assert "recompile_limit" not in r.stderr and "cache_size_limit" not in r.stderr
    assert "Dynamo does not know how to trace" not in r.stderr, r.stderr[-3000:]
    assert "probe error" not in r.stderr, r.stderr[-3000:]
