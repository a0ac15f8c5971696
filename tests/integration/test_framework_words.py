"""Real jobs under `trainprof run`, each told its fix in its framework's own words: Lightning's
training DataLoader is the one read (not the validation loader its sanity check runs first), a
nanoGPT-style script hears eval_interval and eval_iters (it has no DataLoader to give workers),
and a pytorch/examples-style script its -j/--workers flag."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from conftest import Result, run_trainprof, write_script

from trainprof.analysis.measure import measure
from trainprof.store.session import Session

LIGHTNING_LOADERS = """
# Lightning: the validation loader (num_workers=0, batch 64) runs first, in the sanity check;
# the training loader has num_workers=2 (batch 32), each sample a little Python work.
import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset


class Smoothed(Dataset):
    def __init__(self, n: int) -> None:
        self.x = torch.randn(n, 64, generator=torch.Generator().manual_seed(0))
        self.y = self.x[:, :10].argmax(1)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        x = self.x[i]
        for _ in range(20):
            x = x + 0.001 * torch.tanh(x)
        return x, self.y[i]


class Net(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 10))

    def training_step(self, batch, i):
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def validation_step(self, batch, i):
        x, y = batch
        self.log("val_loss", nn.functional.cross_entropy(self.net(x), y))

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


if __name__ == "__main__":
    torch.set_num_threads(1)
    train = DataLoader(Smoothed(4096), batch_size=32, shuffle=True, num_workers=2,
                       persistent_workers=True)
    v = Smoothed(512)
    val = DataLoader(TensorDataset(v.x, v.y), batch_size=64, num_workers=0)
    L.Trainer(max_epochs=2, accelerator="cpu", logger=False, enable_checkpointing=False,
              enable_progress_bar=False, enable_model_summary=False).fit(Net(), train, val)
"""

NANOGPT_STYLE = """
# nanoGPT's shape: config globals, get_batch slicing a np.memmap, estimate_loss every
# eval_interval iterations over eval_iters batches per split; no DataLoader.
import os
import numpy as np
import torch
from torch import nn

eval_interval = 10
log_interval = 5
eval_iters = 30
always_save_checkpoint = False
batch_size = 16
block_size = 32
max_iters = 160

data_dir = "data_bin"
os.makedirs(data_dir, exist_ok=True)
for split, n in (("train", 200_000), ("val", 20_000)):
    np.random.default_rng(0).integers(0, 64, n, dtype=np.uint16).tofile(f"{data_dir}/{split}.bin")


def get_batch(split):
    data = np.memmap(os.path.join(data_dir, f"{split}.bin"), dtype=np.uint16, mode="r")
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([torch.from_numpy(data[i : i + block_size].astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy(data[i + 1 : i + 1 + block_size].astype(np.int64)) for i in ix])
    return x, y


torch.manual_seed(0)
torch.set_num_threads(1)
model = nn.Sequential(nn.Embedding(64, 64), nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)


@torch.no_grad()
def estimate_loss():
    out = {}
    model.eval()
    for split in ["train", "val"]:
        losses = torch.zeros(eval_iters)
        for k in range(eval_iters):
            X, Y = get_batch(split)
            losses[k] = nn.functional.cross_entropy(model(X).view(-1, 64), Y.view(-1)).item()
        out[split] = losses.mean()
    model.train()
    return out


iter_num = 0
X, Y = get_batch("train")
while True:
    if iter_num % eval_interval == 0:
        losses = estimate_loss()
        print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
    loss = nn.functional.cross_entropy(model(X).view(-1, 64), Y.view(-1))
    X, Y = get_batch("train")
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    if iter_num % log_interval == 0:
        print(f"iter {iter_num}: loss {loss.item():.4f}")
    iter_num += 1
    if iter_num > max_iters:
        break
"""

EXAMPLES_STYLE = """
# A pytorch/examples-style script: -j/--workers on its command line, left at 0, and a
# __getitem__ that decodes each sample in the loop.
import argparse
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser(description="PyTorch Training")
parser.add_argument("-j", "--workers", default=0, type=int, metavar="N")
parser.add_argument("-b", "--batch-size", default=32, type=int)
args = parser.parse_args()


class Decoded(Dataset):
    def __len__(self) -> int:
        return 4096

    def __getitem__(self, i: int):
        g = torch.Generator().manual_seed(i)
        x = torch.randn(3, 32, 32, generator=g)
        for _ in range(6):
            x = torch.nn.functional.avg_pool2d(x, 3, 1, 1) + 0.01 * x
        return x, i % 10


def main() -> None:
    torch.set_num_threads(1)
    loader = DataLoader(Decoded(), batch_size=args.batch_size, shuffle=True,
                        num_workers=args.workers)
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
"""


def _run(tmp: Path, name: str, text: str) -> Result:
    r = run_trainprof(tmp, str(write_script(tmp, name, text)), timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


@pytest.mark.parallel
@pytest.mark.skipif(
    importlib.util.find_spec("lightning") is None, reason="needs lightning (make test installs it)"
)
def test_lightning_reads_the_training_loader_not_the_sanity_checks(tmp_path: Path) -> None:
    r = _run(tmp_path, "pl_loaders.py", LIGHTNING_LOADERS)
    m = measure(Session.load(r.run_dir))
    assert m.activity.framework == "lightning"
    assert [v.config["num_workers"] for v in m.loaders] == [2, 0]
    assert m.loaders[0].config["dataset"].endswith("Smoothed")
    said = [e for f in r.report["findings"] for e in f["evidence"] if "num_workers=" in e]
    assert all("num_workers=2" in e for e in said), said


def test_a_nanogpt_style_script_hears_eval_interval_and_eval_iters(tmp_path: Path) -> None:
    r = _run(tmp_path, "train.py", NANOGPT_STYLE)
    first = r.report["findings"][0]
    assert first["id"] == "eval-stall", r.report["findings"]
    own = [f for f in first["fix"] if f.startswith("with nanoGPT: ")]
    assert own and "eval_interval" in own[0] and "eval_iters" in own[0], first["fix"]
    assert not any("worker" in f.lower() for f in first["fix"]), first["fix"]


def test_a_pytorch_examples_style_script_hears_its_workers_flag(tmp_path: Path) -> None:
    r = _run(tmp_path, "main.py", EXAMPLES_STYLE)
    first = r.report["findings"][0]
    assert first["id"] == "input-bound", r.report["findings"]
    assert any(
        f.startswith("with a pytorch/examples-style script: -j/--workers") for f in first["fix"]
    )
