"""The probe's hooks leave torch's code paths as they are: an optimizer's fused, foreach or
per-tensor implementation is the one torch picks without the probe, and a compiled training
step is captured in the same graphs, with the same graph breaks, as in a plain run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_trainprof, write_script

pytestmark = pytest.mark.parallel  # judges no timing or load (CONTRIBUTING)

JOB = """
import json, sys
import torch
import torch.optim.adam as adam_mod
from torch._dynamo.utils import counters

torch.manual_seed(0)
called = []
for impl in ("_single_tensor_adam", "_multi_tensor_adam", "_fused_adam"):
    orig = getattr(adam_mod, impl)
    def spy(*args, __impl=impl, __orig=orig, **kwargs):
        called.append(__impl)
        return __orig(*args, **kwargs)
    setattr(adam_mod, impl, spy)

paths = {}
for name, kwargs in (("default", {}), ("foreach", {"foreach": True}), ("fused", {"fused": True})):
    model = torch.nn.Linear(16, 4)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, **kwargs)
    called.clear()
    for _ in range(5):
        model(torch.randn(8, 16)).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
    paths[name] = sorted(set(called))

model = torch.nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(torch.randn(64, 16)), batch_size=8
)

@torch.compile(backend="eager")
def train_step(x):
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss

counters.clear()
for _ in range(3):
    for (x,) in loader:
        train_step(x)
compiled = {
    "unique_graphs": counters["stats"]["unique_graphs"],
    "graph_breaks": sum(counters["graph_break"].values()),
    "frames": counters["frames"]["total"],
}
with open(sys.argv[1], "w") as f:
    json.dump({"paths": paths, "compiled": compiled}, f)
"""


def test_optimizer_paths_and_a_compiled_step_are_unchanged_by_the_probe(tmp_path: Path) -> None:
    script = write_script(tmp_path, "paths.py", JOB)
    plain_out, probed_out = tmp_path / "plain.json", tmp_path / "probed.json"
    subprocess.run(
        [sys.executable, str(script), str(plain_out)], check=True, timeout=240, cwd=tmp_path
    )
    r = run_trainprof(tmp_path, "--no-stacks", str(script), str(probed_out), timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    plain, probed = json.loads(plain_out.read_text()), json.loads(probed_out.read_text())
    assert plain["paths"] == {
        "default": ["_single_tensor_adam"],  # CPU tensors: torch's default is per tensor
        "foreach": ["_multi_tensor_adam"],
        "fused": ["_fused_adam"],
    }, plain
    assert probed["paths"] == plain["paths"]
    assert probed["compiled"] == plain["compiled"], (plain, probed)
    assert r.report is not None and r.report["summary"]["steps"] > 0  # the probe was in
