"""The benchmark's in-loop switch (``bench/loop.py``'s ``ProbeSwitch``, what the GPU toggle
measures the hooks' cost with) against a real loop under the probe, with the device timeline
on stand-in events (this machine has no CUDA): "all off" leaves no hook of the probe's in the
step, the pre-step hook included (the post-hook registers it around timed steps only), and
"on" gives them back, timed steps marked again."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT, run_reporting_job

pytestmark = pytest.mark.parallel  # judges no timing or load (CONTRIBUTING)

JOB = """
import json, sys
sys.path.insert(0, sys.argv[2])
import torch
from torch import nn
import torch.optim.optimizer as optim_mod
from trainprof.probe import device_marks
from trainprof.probe.state import state
from bench.loop import ProbeSwitch
from stand_in_timeline import use_stand_in_timeline

torch.manual_seed(0)
model = nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
use_stand_in_timeline(every_stride_step=True)

def ours():
    return sum(
        getattr(h, "__module__", "") == "trainprof.probe.device_marks"
        for h in optim_mod._global_optimizer_pre_hooks.values()
    )

def steps(n):
    seen = 0
    for _ in range(n):
        seen += ours()
        model(torch.randn(4, 8)).pow(2).mean().backward()
        opt.step()
    return seen

steps(1)
device_marks.start_timeline(torch, torch.device("cpu"))
steps(40)
switch = ProbeSwitch()
out = {"found": switch.found}
for name, off in (("all", {"steps", "pre_step", "backward"}), ("pre_step", {"pre_step"}),
                  ("on", set())):
    switch.set(frozenset())
    while not ours():  # switched while the hook is in place: the switch must take it out
        steps(1)
    switch.set(frozenset(off))
    counted = state.steps
    out[name] = {"pre_hook_steps": steps(200), "counted": state.steps - counted}
with open(sys.argv[1], "w") as f:
    json.dump(out, f)
"""


def test_the_switch_takes_the_pre_step_hook_out_and_gives_it_back(tmp_path: Path) -> None:
    _r, seen = run_reporting_job(tmp_path, "switched.py", JOB, str(ROOT))
    assert seen["found"]["steps"] and seen["found"]["pre_step"], seen["found"]
    assert seen["all"] == {"pre_hook_steps": 0, "counted": 0}
    assert seen["pre_step"]["pre_hook_steps"] == 0 and seen["pre_step"]["counted"] == 200
    # on: about one step in 16 is timed, the hook in place for it and the step closing its gap
    assert 200 // 48 <= seen["on"]["pre_hook_steps"] <= 200 // 4, seen["on"]
    assert seen["on"]["counted"] == 200
