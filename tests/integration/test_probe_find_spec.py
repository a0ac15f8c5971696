"""A job that looks torch up with ``importlib.util.find_spec`` before importing it (as
``datasets``, ``transformers`` and ``evaluate`` do when imported) still has its steps counted."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_trainprof, write_script

pytestmark = pytest.mark.parallel  # judges no timing or load (CONTRIBUTING)

FIND_SPEC_FIRST = """
import importlib.util
assert importlib.util.find_spec("torch") is not None  # the spec is looked at, then dropped
assert importlib.util.find_spec("torch") is not None
import torch
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(30):
    opt.zero_grad()
    model(torch.randn(16, 8)).pow(2).mean().backward()
    opt.step()
"""


def test_steps_are_counted_after_a_find_spec_of_torch(tmp_path: Path) -> None:
    r = run_trainprof(
        tmp_path, "--no-stacks", str(write_script(tmp_path, "hf.py", FIND_SPEC_FIRST))
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.report is not None and r.report["summary"]["steps"] == 30, r.stderr[-2000:]
