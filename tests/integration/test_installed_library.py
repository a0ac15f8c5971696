"""A library installed where no folder name says so is not the user's code, for real.

GIVEN a training script whose validation loader is wrapped by an installed library's loader
(timm's ``PrefetchLoader`` in shape: it normalizes each batch on the way, the evaluation's hot
code), installed with ``pip install --target vendor`` inside the project and put on PYTHONPATH,
THEN the eval-stall names validate() in train.py, its hot line is validate()'s loop in train.py,
and nothing it names lies in the library's files.
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from conftest import run_trainprof

pytestmark = pytest.mark.slow

LOADER = '''\
import torch


class PrefetchLoader:
    """Wraps a DataLoader and normalizes each batch on the way."""

    def __init__(self, loader, passes=400):
        self.loader, self.passes = loader, passes

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        for x, y in self.loader:
            for _ in range(self.passes):
                x = (x - x.mean(dim=0, keepdim=True)) / (x.std(dim=0, keepdim=True) + 1e-6)
            yield x, y
'''

TRAIN = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from fakeloaders import PrefetchLoader


def validate(model, loader):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for x, y in loader:
            total += nn.functional.cross_entropy(model(x), y).item()
    model.train()
    return total / len(loader)


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    data = TensorDataset(torch.randn(4096, 64), torch.randint(0, 10, (4096,)))
    train = DataLoader(data, batch_size=32, shuffle=True)
    held_out = TensorDataset(torch.randn(1024, 64), torch.randint(0, 10, (1024,)))
    val = PrefetchLoader(DataLoader(held_out, batch_size=64))
    step = 0
    for epoch in range(2):
        for x, y in train:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step % 60 == 0:
                print(f"step {step}: val loss {validate(model, val):.3f}", flush=True)


if __name__ == "__main__":
    main()
"""


def _wheel(tmp: Path) -> Path:
    """fakeloaders 0.1 as a pure-Python wheel: its modules, METADATA, WHEEL and RECORD."""
    files = {
        "fakeloaders/__init__.py": "from fakeloaders.loader import PrefetchLoader\n",
        "fakeloaders/loader.py": LOADER,
        "fakeloaders-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: fakeloaders\n"
        "Version: 0.1\n",
        "fakeloaders-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\n"
        "Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{name},sha256={digest.decode()},{len(text.encode())}")
    record.append("fakeloaders-0.1.dist-info/RECORD,,")
    files["fakeloaders-0.1.dist-info/RECORD"] = "\n".join(record) + "\n"
    path = tmp / "fakeloaders-0.1-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return path


def test_an_installed_loaders_code_is_not_where_the_eval_stall_points(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    vendor = proj / "vendor"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps"]
        + ["--target", str(vendor), str(_wheel(tmp_path))],
        check=True,
        capture_output=True,
        timeout=120,
    )
    assert (vendor / "fakeloaders" / "loader.py").is_file()
    (proj / "train.py").write_text(textwrap.dedent(TRAIN))
    env = {**os.environ, "PYTHONPATH": str(vendor)}
    r = run_trainprof(proj, "train.py", env=env, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.report is not None
    found = {f["id"]: f for f in r.report["findings"]}
    assert "eval-stall" in found, r.report["findings"]
    f = found["eval-stall"]
    assert f["where"].startswith("train.py:") and "(main → validate())" in f["where"], f
    assert f["hotspot"] == "train.py:12 (validate)", f  # `for x, y in loader:`
    located = [g[k] or "" for g in r.report["findings"] for k in ("where", "hotspot")]
    assert not any("fakeloaders" in w for w in located), located
