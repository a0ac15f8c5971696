"""The probe's per-step footprint in a real torch loop: the watches that read how the job calls
``zero_grad()`` and autocast record what they see and then take themselves out, and a job with
neither DDP nor a GPU keeps no wrapper it does not need on ``backward`` or the optimizer step
(each is a Python call a step, which a fast GPU loop pays on cold caches)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_reporting_job

from trainprof.store.session import Session

pytestmark = pytest.mark.parallel  # judges no timing or load (CONTRIBUTING)

JOB = """
import json, os, sys
import torch
from torch import nn
import torch.optim.optimizer as optim_mod

# trainprof's package as the probe loaded it (a word in a path is no test: the checkout's own
# folder may be named trainprof)
OURS = os.path.dirname(sys.modules["trainprof"].__file__) + os.sep

def ours(fn):
    return getattr(getattr(fn, "__code__", None), "co_filename", "").startswith(OURS)

def hooks():
    backward = vars(torch.autograd)["backward"]
    return {
        "zero_grad": ours(vars(torch.optim.Optimizer)["zero_grad"]),
        "autocast": ours(vars(torch.amp.autocast_mode.autocast)["__enter__"]),
        "backward_layers": ours(backward) + ours(getattr(backward, "__wrapped__", None)),
        "pre_step_hooks": len(optim_mod._global_optimizer_pre_hooks),
    }

torch.manual_seed(0)
model = nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
seen = []
for step in range(6):
    seen.append(hooks())
    opt.zero_grad(set_to_none=step != 1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(torch.randn(4, 8)).float().pow(2).mean()
    loss.backward()
    opt.step()
seen.append(hooks())
with open(sys.argv[1], "w") as f:
    json.dump(seen, f)
"""


def test_watches_record_then_leave_and_no_idle_wrapper_stays(tmp_path: Path) -> None:
    r, seen = run_reporting_job(tmp_path, "watched.py", JOB)
    # zero_grad: watched until set_to_none=False is seen (step 1), then torch's own
    assert [s["zero_grad"] for s in seen] == [True, True, False, False, False, False, False]
    # autocast: watched over the first two optimizer steps (entered at step 2, then left)
    assert [s["autocast"] for s in seen] == [True, True, True, False, False, False, False]
    # backward: the probe's mark alone (the DDP wait timer comes with a DDP model), gone once the
    # first optimizer step brought no CUDA timeline; no pre-step hook (it comes with a timeline)
    assert [s["backward_layers"] for s in seen] == [1, 1, 0, 0, 0, 0, 0]
    assert {s["pre_step_hooks"] for s in seen} == {0}

    primary = Session.load(r.run_dir).primary
    assert primary is not None
    infos = primary.infos
    assert {"zero_grad_set_to_none": False}.items() <= next(
        i for i in infos if "zero_grad_set_to_none" in i
    ).items()
    autocasts = [(i["autocast"], i["dtype"]) for i in infos if "autocast" in i]
    assert autocasts == [("cpu", "torch.bfloat16")]
    assert r.report is not None and r.report["summary"]["steps"] == 6


STEADY_STEP_JOB = """
import collections, json, os, sys
import torch
from torch import nn
from torch.utils.data import DataLoader
from trainprof.probe import device_marks
from stand_in_timeline import use_stand_in_timeline  # this machine has no CUDA events

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 2))
opt = torch.optim.AdamW(model.parameters())
loader = DataLoader(list(zip(torch.randn(4096, 16), torch.randint(0, 2, (4096,)))), batch_size=8)
batches = iter(loader)

def step():
    x, y = next(batches)
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = nn.functional.cross_entropy(model(x).float(), y)
    loss.backward()
    opt.step()

step()
# what the first step of a CUDA job starts: the device timeline and its pre-step hook
use_stand_in_timeline(memory=lambda: (1, 2, 3))
device_marks.start_timeline(torch, torch.device("cpu"))
for _ in range(20):
    step()
OURS = os.path.dirname(sys.modules["trainprof"].__file__) + os.sep  # as the probe loaded it
steps = [collections.Counter() for _ in range(200)]
now = steps[0]

def count(frame, event, arg):
    if event == "call" and frame.f_code.co_filename.startswith(OURS):
        now[frame.f_code.co_qualname] += 1

sys.setprofile(count)
for now in steps:
    step()
sys.setprofile(None)
# A timed step (how many there are depends on the loop's speed: at most 8 a second) calls the
# timeline's methods; the steady step is an untimed one.
untimed = [c for c in steps if not any("Timeline" in name for name in c)]
calls = sum(untimed, collections.Counter())
with open(sys.argv[1], "w") as f:
    json.dump({"untimed": len(untimed), "calls": {n: k / len(untimed) for n, k in calls.items()}}, f)
"""


def test_a_steady_step_of_a_cuda_like_job_makes_six_probe_calls(tmp_path: Path) -> None:
    """The probe's Python calls in a steady step (DataLoader, autocast, AdamW, the device
    timeline with stand-in events), counted with ``sys.setprofile`` over the untimed steps (a
    timed one calls the timeline too; how many are timed depends on the loop's speed, and a
    loaded machine timed enough of them to put a timed step's call over the bar): on a
    fast GPU loop each costs microseconds on cold caches, so a new one must be a choice. It was
    24 before the timeline's marks were skipped on untimed steps and the watches left, 10
    before the post-hook counted an untimed step without calling the timeline, the loader's
    wrapper read a common batch's size inline and the pre-step hook was registered around timed
    steps only, 7 before the post-hook queued its step record itself."""
    _r, seen = run_reporting_job(tmp_path, "steady.py", STEADY_STEP_JOB)
    assert seen["untimed"] >= 100, seen
    # (a rare call, such as the writer flushing a late queue itself, is not the steady step's)
    per_step = {name: round(n, 2) for name, n in seen["calls"].items() if n >= 0.5}
    assert per_step == {
        "_wrap_loader.<locals>.__next__": 1,
        "_wrap_loader.<locals>._next_index": 1,
        "_timed_fetch.<locals>.fetch": 1,
        "_timed_collate.<locals>.__init__.<locals>.timed": 1,
        "_marked_backward.<locals>.backward": 1,
        "_on_optimizer_step": 1,
    }


FIRST_BATCH_JOB = """
import json, sys, weakref
import torch

def main():
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    first = None
    for step in range(4):
        x = torch.randn(4, 8)
        if step == 0:
            first = weakref.ref(x)
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
    with open(sys.argv[1], "w") as f:
        json.dump({"first_batch_alive": first() is not None}, f)

main()
"""


def test_reading_the_models_at_the_first_step_keeps_nothing_of_the_loop_alive(
    tmp_path: Path,
) -> None:
    """The probe reads the training loop's locals at the first optimizer step to find its
    models; before Python 3.13 that left a copy of them in the frame (the first batch was kept
    until main() returned: a job short of file descriptors crashed on it)."""
    r, seen = run_reporting_job(tmp_path, "first_batch.py", FIRST_BATCH_JOB)
    assert r.report is not None and r.report["summary"]["steps"] == 4
    assert seen == {"first_batch_alive": False}


COMPILING_JOB = """
import json, os, sys
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
compiled = torch.compile(model, backend="eager")
for phase in range(2):
    for step in range(3):
        loss = compiled(torch.randn(4, 8)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.compiler.reset()  # empties Dynamo's compile callbacks: the probe's come back
with open(sys.argv[1], "w") as f:
    json.dump([], f)
"""


def test_compiles_are_timed_under_the_line_that_called_the_model_and_after_a_reset(
    tmp_path: Path,
) -> None:
    r, _ = run_reporting_job(tmp_path, "compiling.py", COMPILING_JOB)
    primary = Session.load(r.run_dir).primary
    assert primary is not None
    compiles = [i["compile"] for i in primary.infos if "compile" in i]
    traced = [c for c in compiles if c["trigger"] == "DYNAMO"]
    assert len(traced) == 2, compiles  # one a phase: the reset dropped the first graph
    for c in traced:
        assert c["t1"] > c["t0"] and c["function"] == "<module>", c
        assert c["file"].endswith("compiling.py") and c["line"] == 12, c
