"""Which optimizer's steps count: a GAN's two optimizers count once per iteration, and a script
that builds a new optimizer per phase is followed from one to the next."""

from __future__ import annotations

from pathlib import Path

from conftest import run_trainprof, write_script

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
