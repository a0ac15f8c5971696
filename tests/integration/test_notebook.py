"""The in-process API and the notebook magic, for real: a Jupyter kernel (ipykernel, run by
nbclient) profiles cells with ``%%trainprof``; a plain script uses ``trainprof.profile()``. Each
profiled span gets the same report as ``trainprof run``, the process stays alive and usable,
and nothing of trainprof (hook, thread, process, environment) stays behind."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import trainprof_cmd, write_script

pytestmark = [pytest.mark.slow, pytest.mark.parallel]

SETUP = """
import sys
import torch
from torch.utils.data import DataLoader, TensorDataset

model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = TensorDataset(torch.randn(8192, 32), torch.randn(8192, 1))
originals = (
    torch.autograd.backward, torch.nn.Module.train, torch.optim.SGD.zero_grad, sys.excepthook
)

def train(steps):
    for i, (x, y) in enumerate(DataLoader(data, batch_size=16)):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i + 1 == steps:
            return
"""

LEFT_BEHIND = """
import os, sys, threading
import trainprof.probe.import_hook as hooks
print(json.dumps({
    "threads": [t.name for t in threading.enumerate()],
    "finders": [type(f).__name__ for f in sys.meta_path if isinstance(f, hooks._AfterImport)],
    "env": [k for k in os.environ if k.startswith("TRAINPROF_")],
    "restored": originals == (
        torch.autograd.backward, torch.nn.Module.train, torch.optim.SGD.zero_grad, sys.excepthook
    ),
    "children": [c for c in __import__("psutil").Process().children(recursive=True)
                 if c.status() != "zombie"] == [],
}))
"""


def _report(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "report.json").read_text())


def test_cells_profiled_in_a_real_kernel_each_get_a_report(tmp_path: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    runs = [tmp_path / f"cell{i}" for i in range(3)]
    cells = [
        "%load_ext trainprof\nimport json",
        SETUP,
        f"%%trainprof {runs[0]}\ntrain(300)",
        f"%%trainprof {runs[1]}\ntrain(300)",
        f"%%trainprof {runs[2]}\ntrain(60)\nraise ValueError('bad batch 7')",
        LEFT_BEHIND,
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = nbclient.NotebookClient(
        nb,
        timeout=240,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    outputs = [cell.get("outputs", []) for cell in nb.cells]
    for i in (2, 3, 4):  # each profiled cell: the HTML report inline, and a line as text
        shown = [o for o in outputs[i] if o["output_type"] == "display_data"]
        assert len(shown) == 1, outputs[i]
        assert "<iframe srcdoc=" in shown[0]["data"]["text/html"]
        assert shown[0]["data"]["text/plain"].startswith("trainprof: "), shown[0]["data"]
        assert str(runs[i - 2]) in shown[0]["data"]["text/plain"]
    for run in runs[:2]:  # the second cell's report counts its own steps, not the first's too
        assert _report(run)["summary"]["steps"] == 300, _report(run)["summary"]
    errors = [o for o in outputs[4] if o["output_type"] == "error"]
    assert errors and errors[0]["ename"] == "ValueError", outputs[4]
    assert any("bad batch 7" in line for line in errors[0]["traceback"])
    failed = _report(runs[2])
    assert failed["run"]["exception"]["type"] == "ValueError"
    assert failed["summary"]["steps"] == 60
    (left,) = [o for o in outputs[5] if o["output_type"] == "stream"]
    state = json.loads(left["text"])
    assert state["finders"] == [] and state["env"] == [], state
    assert state["restored"] and state["children"], state
    assert not [t for t in state["threads"] if t.startswith("trainprof")], state
    # the run directory is an ordinary one: `trainprof report` reads it again
    again = subprocess.run(
        trainprof_cmd("report", str(runs[0]), "--json", "-"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["summary"]["steps"] == 300


SCRIPT = """
import json, sys, threading
import trainprof
{setup}
with trainprof.profile(run_dir=sys.argv[1], print_report=False) as p:
    train(300)
first = p.report
trainprof.start(run_dir=sys.argv[2], stacks=False)
train(120)
second = trainprof.stop()
print(json.dumps({{
    "first": first["summary"]["steps"], "second": second["summary"]["steps"],
    "left": p.left_behind, "threads": [t.name for t in threading.enumerate()],
    "summary": p.summary(),
}}))
"""


def test_a_script_profiles_two_spans_and_keeps_running(tmp_path: Path) -> None:
    script = write_script(tmp_path, "job.py", SCRIPT.format(setup=textwrap.dedent(SETUP)))
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "a"), str(tmp_path / "b")],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    assert (out["first"], out["second"]) == (300, 120), out
    assert out["left"] == [] and out["threads"] == ["MainThread"], out
    assert out["summary"].startswith("trainprof: ") and str(tmp_path / "a") in out["summary"]
    assert (tmp_path / "a" / "stacks-0.json.gz").exists() or any((tmp_path / "a").glob("stacks-*"))
    assert not any((tmp_path / "b").glob("stacks-*"))  # stacks=False: no py-spy
