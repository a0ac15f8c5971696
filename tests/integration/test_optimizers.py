"""Which optimizer's steps count: a GAN's two optimizers count once per iteration, and a script
that builds a new optimizer per phase is followed from one to the next. Which of the model's
parameters no optimizer holds: a backbone left trainable beside a head-only optimizer is named;
a GAN's two optimizers, or a backbone frozen with requires_grad_(False), are not."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_trainprof, write_script

pytestmark = pytest.mark.parallel  # judges no timing or load (CONTRIBUTING)

PHASES = """
import torch
model = torch.nn.Linear(16, 1)
for phase in range(6):  # a new optimizer per phase (a schedule written by hand)
    opt = torch.optim.SGD(model.parameters(), lr=0.01 / (phase + 1))
    for _ in range(40):
        loss = model(torch.randn(32, 16)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""

GAN = """
import torch
g, d = torch.nn.Linear(8, 8), torch.nn.Linear(8, 1)
opt_d = torch.optim.Adam(d.parameters())
opt_g = torch.optim.SGD(g.parameters(), lr=0.01)
for _ in range(60):
    fake = g(torch.randn(16, 8))
    loss_d = d(fake.detach()).mean() - d(torch.randn(16, 8)).mean()
    opt_d.zero_grad(); loss_d.backward(); opt_d.step()
    loss_g = -d(fake).mean()
    opt_g.zero_grad(); loss_g.backward(); opt_g.step()
"""


def test_a_replacement_optimizer_is_followed(tmp_path: Path) -> None:
    r = run_trainprof(tmp_path, str(write_script(tmp_path, "phases.py", PHASES)))
    assert r.returncode == 0, r.stderr[-2000:]
    # A new optimizer is counted from its second step (its first shows it is no alternating
    # partner), or from its first when it took the id of the one it replaced: 235 to 240.
    assert 40 + 5 * 39 <= r.report["summary"]["steps"] <= 6 * 40
    assert "SGD#5" in r.stderr and "other optimizers stepped too" in r.stderr


def test_a_gans_two_optimizers_count_one_step_per_iteration(tmp_path: Path) -> None:
    r = run_trainprof(tmp_path, str(write_script(tmp_path, "gan.py", GAN)))
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.report["summary"]["steps"] == 60
    assert "counted: Adam#0" in r.stderr and "SGD#1 60×" in r.stderr


GAN_MODULE = """
import torch
class Gan(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.g, self.d = torch.nn.Linear(8, 8), torch.nn.Linear(8, 1)
gan = Gan()
opt_d = torch.optim.Adam(gan.d.parameters())
opt_g = torch.optim.SGD(gan.g.parameters(), lr=0.01)
gan.train()
for _ in range(60):
    fake = gan.g(torch.randn(16, 8))
    loss_g = -gan.d(fake).mean()  # the generator's step first: d gets gradients too
    opt_g.zero_grad(); loss_g.backward(); opt_g.step()
    loss_d = gan.d(fake.detach()).mean() - gan.d(torch.randn(16, 8)).mean()
    opt_d.zero_grad(); loss_d.backward(); opt_d.step()
"""

HEAD_ONLY = """
import sys
import torch
model = torch.nn.Sequential()
model.add_module("backbone", torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU()))
model.add_module("head", torch.nn.Linear(256, 4))
if sys.argv[1] == "frozen":
    model.backbone.requires_grad_(False)
opt = torch.optim.SGD(model.head.parameters(), lr=0.01)  # fine-tune the head only
model.train()
for _ in range(60):
    loss = model(torch.randn(32, 32)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
"""


def test_a_gans_two_optimizers_hold_every_parameter_of_its_model(tmp_path: Path) -> None:
    r = run_trainprof(tmp_path, str(write_script(tmp_path, "gan_module.py", GAN_MODULE)))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "unoptimized-params" not in r.finding_ids, r.finding_ids


def test_a_backbone_left_trainable_beside_a_head_only_optimizer_is_named(tmp_path: Path) -> None:
    script = str(write_script(tmp_path, "head_only.py", HEAD_ONLY))
    r = run_trainprof(tmp_path, script, "trainable")
    (f,) = [f for f in r.report["findings"] if f["id"] == "unoptimized-params"]
    assert f["title"].startswith("2 parameters get gradients that no optimizer uses: model."), f
    assert "model.backbone.0.weight, model.backbone.0.bias" in f["evidence"][0], f["evidence"]
    assert "model.backbone.requires_grad_(False)" in f["fix"][1], f["fix"]
    frozen = run_trainprof(tmp_path, script, "frozen")
    assert frozen.returncode == 0, frozen.stderr[-2000:]
    assert "unoptimized-params" not in frozen.finding_ids, frozen.finding_ids


MARGIN_LOSS = """
import torch
class MarginLoss(torch.nn.Module):  # class centres of its own (ArcFace-style)
    def __init__(self):
        super().__init__()
        self.centres = torch.nn.Parameter(torch.randn(10, 16))
    def forward(self, emb, y):
        logits = torch.nn.functional.normalize(emb) @ torch.nn.functional.normalize(self.centres).T
        return torch.nn.functional.cross_entropy(logits * 16, y)
def main():
    net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16))
    criterion = MarginLoss()
    teacher = torch.nn.Linear(32, 16)  # trainable, but run without gradients: none to flag
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for _ in range(60):  # no train() anywhere
        x, y = torch.randn(32, 32), torch.randint(0, 10, (32,))
        with torch.no_grad():
            target = teacher(x)
        loss = criterion(net(x), y) + (net(x) - target).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
main()
"""


def test_a_loss_with_weights_of_its_own_left_out_of_the_optimizer_is_named(tmp_path: Path) -> None:
    """No train(): the models are what the loop holds (net, criterion, teacher), by their names."""
    r = run_trainprof(tmp_path, str(write_script(tmp_path, "margin.py", MARGIN_LOSS)))
    (f,) = [f for f in r.report["findings"] if f["id"] == "unoptimized-params"]
    assert f["title"].startswith("1 parameter gets gradients that no optimizer uses: criterion"), f
    assert "of net, criterion and teacher" in f["evidence"][0], f["evidence"]
    assert f["evidence"][0].endswith(": criterion.centres"), f["evidence"]
    assert "opt.add_param_group({'params': criterion.parameters()})" in f["fix"][0], f["fix"]
