"""Real training frameworks, unmodified, under `trainprof run`: the Hugging Face Trainer and
Lightning run the loop, so their users get the framework's own setting beside the generic fix;
Lightning ends each validation by assigning each module's ``training`` flag back (no
``train()`` call), which the probe notices at the next training batch."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
from conftest import Result, run_trainprof, write_script

from trainprof.store.session import Session

# The jobs import them; this process need not (importing lightning here took 5 s a collection).
pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("transformers", "lightning")),
    reason="needs transformers and lightning (make test installs them)",
)

HF_JOB = """
# A tiny GPT-2 under the Hugging Face Trainer, evaluating every 30 steps (no download).
import torch
from torch.utils.data import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments


class Tokens(Dataset):
    def __init__(self, n: int) -> None:
        self.x = torch.randint(0, 256, (n, 32), generator=torch.Generator().manual_seed(n))

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.x[i], "labels": self.x[i]}


torch.set_num_threads(1)
model = GPT2LMHeadModel(GPT2Config(vocab_size=256, n_positions=32, n_embd=32, n_layer=2, n_head=2))
args = TrainingArguments(
    output_dir="hf_out", per_device_train_batch_size=16, max_steps=240, eval_strategy="steps",
    eval_steps=30, per_device_eval_batch_size=16, save_strategy="no", logging_steps=50,
    report_to=[], use_cpu=True, disable_tqdm=True,
)
Trainer(model=model, args=args, train_dataset=Tokens(2048), eval_dataset=Tokens(1024)).train()
"""

LIGHTNING_JOB = """
# A small MLP under Lightning, validating every 20 batches.
import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))

    def training_step(self, batch, i):
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def validation_step(self, batch, i):
        x, y = batch
        self.log("val_loss", nn.functional.cross_entropy(self.net(x), y))

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


torch.set_num_threads(1)
x = torch.randn(8192, 64)
y = x[:, :10].argmax(1)
train = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)
val = DataLoader(TensorDataset(x[:4096], y[:4096]), batch_size=64)
L.Trainer(
    max_epochs=6, accelerator="cpu", logger=False,
    callbacks=[ModelCheckpoint(dirpath="ckpts", every_n_train_steps=100, save_top_k=-1)],
    enable_progress_bar=False, enable_model_summary=False, val_check_interval=20,
).fit(Net(), train, val)
"""

OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def _run(tmp: Path, name: str, text: str, *run_args: str) -> Result:
    script = write_script(tmp, name, text)
    r = run_trainprof(
        tmp, str(script), env={**os.environ, **OFFLINE}, timeout=240, run_args=run_args
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return r


@pytest.mark.parametrize("stacks", ["sampled", "--no-stacks"])
def test_the_hugging_face_trainer_gets_its_own_settings(tmp_path: Path, stacks: str) -> None:
    """Without stack samples the framework is the one that called the first optimizer step."""
    r = _run(tmp_path, "hf_job.py", HF_JOB, *([stacks] if stacks.startswith("--") else []))
    first = r.report["findings"][0]
    assert first["id"] == "eval-stall", r.report["findings"]
    assert "model.eval() … model.train()" in first["evidence"][0]
    assert any(
        f.startswith("with the Hugging Face Trainer: a larger eval_steps") for f in first["fix"]
    )


def test_lightning_evaluations_end_where_it_restores_training_mode(tmp_path: Path) -> None:
    r = _run(tmp_path, "pl_job.py", LIGHTNING_JOB)
    first = r.report["findings"][0]
    assert first["id"] == "eval-stall", r.report["findings"]
    # 6 epochs of 128 batches, a validation every 20: 36 of them, each ended by Lightning
    assert "model.eval() … model.train()" in first["evidence"][0], first["evidence"]
    assert not any("call model.eval()" in f for f in first["fix"])
    assert any(f.startswith("with Lightning: Trainer(val_check_interval") for f in first["fix"])
    # Lightning serialises into memory (a torch.save inside its own save), then writes: one
    # save a checkpoint, named by its file
    primary = Session.load(r.run_dir).primary
    assert primary is not None
    paths = [path for _t, _d, _b, path in primary.saves]
    assert len(paths) == 6 * 128 // 100 and all(p.endswith(".ckpt") for p in paths), paths
