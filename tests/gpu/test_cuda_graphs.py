"""A job that captures whole training steps with ``torch.cuda.graph`` runs the probe's hooks
inside the capture (backward, the optimizer's pre- and post-hooks). An event query or a timing
event there is illegal and would break the user's capture; the timeline must make no CUDA call
while a capture is on, and the job must run exactly as without trainprof. Skipped without CUDA.

The job captures 30 steps, one graph each, 0.15 s apart (so the timeline's 8-a-second cap never
holds a step back and its jittered stride lands timed steps and gap closings inside captures),
and replays each graph once.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_trainprof, write_script
from gpu_helpers import cuda_available, gpu_env, keep

pytestmark = pytest.mark.skipif(not cuda_available(), reason="no CUDA device")

CAPTURED = """
import time

import torch
from torch import nn

dev = torch.device("cuda")
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = nn.CrossEntropyLoss()
x = torch.randn(64, 512, device=dev)
y = torch.randint(0, 10, (64,), device=dev)
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):  # eager warm-up, as the CUDA graphs docs ask
    for _ in range(20):
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()
torch.cuda.current_stream().wait_stream(side)
graphs = []
for _ in range(30):
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    g.replay()
    graphs.append((g, loss))
    time.sleep(0.15)
torch.cuda.synchronize()
print("CAPTURED", len(graphs), "graphs, last loss", round(float(graphs[-1][1]), 4))
"""


def test_whole_step_capture_runs_unharmed_under_trainprof(tmp_path: Path) -> None:
    script = write_script(tmp_path, "captured.py", CAPTURED)
    r = run_trainprof(tmp_path, str(script), env=gpu_env(), timeout=180)
    keep("cuda_graph_capture", r)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "CAPTURED 30 graphs" in r.stdout, r.stdout[-2000:]
    infos = (r.report or {}).get("run", {})
    assert "device_timeline_error" not in str(infos), infos
