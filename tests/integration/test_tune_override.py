"""`trainprof tune`'s settings override, inside real jobs: it reaches the training DataLoader
only (a sanity check before training and the evaluation loader keep theirs), and the job's own
output and exit code are those of the job run without it."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import write_script
from test_frameworks import HF_JOB, LIGHTNING_JOB, OFFLINE

from trainprof.analysis.loaders import training_loader_key
from trainprof.collect.launcher import probe_env
from trainprof.probe.overrides import APPLIED_FILE, ENV_OVERRIDES
from trainprof.store.session import Session

pytestmark = pytest.mark.parallel  # exit codes, output and recorded settings: no load changes them

PLAIN_LOOP = """
import json, sys
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
train = TensorDataset(torch.randn(192, 8), torch.randn(192, 1))
val = TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
model = nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
val_loader = DataLoader(val, batch_size=32)
seen = {"train": [], "val": [], "sanity": []}
with torch.no_grad():  # a sanity check before training
    for x, _ in val_loader:
        seen["sanity"].append(val_loader.num_workers)
    print(f"sanity {float(model(val.tensors[0]).sum()):.4f}")
for epoch in range(2):
    model.train()
    loader = DataLoader(train, batch_size=32)  # built anew each epoch
    torch.set_num_threads(1)
    for x, y in loader:
        seen["train"].append([loader.num_workers, loader.persistent_workers, torch.get_num_threads()])
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        for x, y in val_loader:
            seen["val"].append(val_loader.num_workers)
        print(f"epoch {epoch} val {float(nn.functional.mse_loss(model(val.tensors[0]), val.tensors[1])):.6f}")
with open(sys.argv[1], "w") as f:
    json.dump(seen, f)
raise SystemExit(3)
"""


def _job(tmp: Path, script: Path, settings: dict[str, object] | None, name: str):
    """The job run plainly (``settings`` None) or with the probe and the override."""
    out = tmp / f"{name}.json"
    env = dict(os.environ)
    run_dir = tmp / f"{name}-run"
    if settings is not None:
        run_dir.mkdir()
        env = probe_env(run_dir, None)
        env[ENV_OVERRIDES] = json.dumps(settings)
    proc = subprocess.run(
        [sys.executable, str(script), str(out)],
        env={**env, **OFFLINE},
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=240,
    )
    return proc, (json.loads(out.read_text()) if out.is_file() else None), run_dir


def test_the_training_loader_gets_the_override_and_nothing_else_changes(tmp_path: Path) -> None:
    script = write_script(tmp_path, "loop.py", PLAIN_LOOP)
    plain, plain_seen, _ = _job(tmp_path, script, None, "plain")
    settings = {"num_workers": 2, "persistent_workers": True, "threads": 2}
    tuned, seen, run_dir = _job(tmp_path, script, settings, "tuned")
    assert (tuned.returncode, tuned.stdout) == (plain.returncode, plain.stdout) == (3, plain.stdout)
    assert plain_seen["train"] == [[0, False, 1]] * 12
    # both epochs' loaders (one dataset) get it, and the job's own set_num_threads(1) the 2
    assert seen["train"] == [[2, True, 2]] * 12, seen
    assert seen["sanity"] == [0, 0] and seen["val"] == [0, 0] * 2, seen
    applied = json.loads((run_dir / APPLIED_FILE).read_text())
    assert applied["loaders"] == 2 and applied["threads"] == applied["threads_at_exit"] == 2


def _framework_run(tmp: Path, name: str, body: str) -> Session:
    script = write_script(tmp, name, body)
    proc, _, run_dir = _job(tmp, script, {"num_workers": 1, "persistent_workers": True}, "fw")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return Session.load(run_dir)


def _workers_by_loader(session: Session) -> tuple[int | None, list[int | None]]:
    primary = session.primary
    assert primary is not None
    train = training_loader_key(primary)
    others = [cfg.get("num_workers") for k, cfg in primary.loaders.items() if k != train]
    return primary.loaders[train].get("num_workers"), others


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="needs transformers")
def test_the_hugging_face_trainer_s_training_loader_gets_it(tmp_path: Path) -> None:
    body = HF_JOB.replace("max_steps=240", "max_steps=40").replace("eval_steps=30", "eval_steps=20")
    train, others = _workers_by_loader(_framework_run(tmp_path, "hf_job.py", body))
    assert train == 1 and others and all(n == 0 for n in others), (train, others)


@pytest.mark.skipif(importlib.util.find_spec("lightning") is None, reason="needs lightning")
def test_lightning_s_training_loader_gets_it(tmp_path: Path) -> None:
    body = LIGHTNING_JOB.replace("max_epochs=6", "max_epochs=1")
    train, others = _workers_by_loader(_framework_run(tmp_path, "pl_job.py", body))
    assert train == 1 and others and all(n == 0 for n in others), (train, others)


def test_the_ceilings_replay_the_input_or_run_it_alone(tmp_path: Path) -> None:
    """``step``: the training loader serves its first batches again, its passes as long as the
    job's own; ``input``: the loader iterated alone, and the job stopped (exit 0) before a step."""
    script = write_script(tmp_path, "loop.py", PLAIN_LOOP)
    step, seen, run_dir = _job(tmp_path, script, {"ceiling": "step"}, "step")
    assert step.returncode == 3 and "epoch 1 val" in step.stdout, step.stderr[-2000:]
    assert len(seen["train"]) == 12 and seen["val"] == [0, 0] * 2
    assert json.loads((run_dir / APPLIED_FILE).read_text())["replayed"] == 6  # 192 / 32
    alone, seen, run_dir = _job(tmp_path, script, {"ceiling": "input", "window_s": 0.3}, "input")
    assert alone.returncode == 0 and "epoch 0" not in alone.stdout, alone.stderr[-2000:]
    assert seen is None  # stopped before the job wrote what it saw
    measured = json.loads((run_dir / APPLIED_FILE).read_text())["input_alone"]
    assert measured["samples"] > 0 and measured["seconds"] >= 0.3, measured
