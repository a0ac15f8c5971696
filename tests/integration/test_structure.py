"""The probe's one pass over the model and optimizer at the first step, on a real torch job:
what the GPU-usage advice rules read (they judge it only on CUDA)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_trainprof, write_script

from trainprof.store.session import Session

pytestmark = pytest.mark.parallel  # judges no timing or load (CONTRIBUTING)

SCRIPT = """
import copy
import torch
from torch import nn
model = nn.Sequential(
    nn.Conv2d(3, 96, 3, padding=1), nn.BatchNorm2d(96), nn.ReLU(),
    nn.Conv2d(96, 96, 3, padding=1, bias=False), nn.BatchNorm2d(96), nn.ReLU(),
    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(96, 100),
)
ema = copy.deepcopy(model)  # another module the script holds, none of it in the optimizer
def fit(probe_head, net):  # no train(): the model is the module holding the optimizer's weights
    opt = torch.optim.SGD(net.parameters(), lr=0.01, foreach=False)
    for _ in range(20):
        loss = net(torch.randn(8, 3, 16, 16)).square().mean()
        opt.zero_grad(set_to_none=False)
        loss.backward()
        opt.step()
fit(nn.Linear(100, 2), model)
"""


def test_structure_facts_of_a_real_model(tmp_path: Path) -> None:
    r = run_trainprof(tmp_path, str(write_script(tmp_path, "convnet.py", SCRIPT)))
    assert r.returncode == 0, r.stderr[-2000:]
    infos = Session.load(r.run_dir).primary.infos  # type: ignore[union-attr]
    facts = next(i["structure"] for i in infos if "structure" in i)
    assert facts["model"] == "Sequential"
    assert facts["conv2d"] == 2 and facts["conv2d_channels_last"] == 0
    assert facts["conv_bias_before_bn"] == ["0"]  # the second conv has no bias
    assert facts["misaligned"] == [["8", 96, 100]]  # the first conv's 3 input channels are fine
    assert facts["optimizer"]["class"] == "SGD" and facts["optimizer"]["foreach"] is False
    assert facts["cudnn_benchmark"] is False
    assert any(i.get("zero_grad_set_to_none") is False for i in infos)
    # On CPU the advice is not given: it is about Tensor Cores and cuDNN.
    assert "conv-bias-before-bn" in {s["id"] for s in r.report["skipped"]}
