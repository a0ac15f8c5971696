"""A measured value that one decimal would round to zero is said as under it, never as 0.0."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import pytest

from trainprof.analysis.ledger import Ledger
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._handover import per_batch_fix


def _fix(sampler_s: float, batches: float) -> str:
    led = Ledger(10.0, {"step": 9.0, "sampler": sampler_s}, "stack samples")
    return per_batch_fix(cast(Metrics, SimpleNamespace(ledger=led)), 0.0007, batches)[0]


@pytest.mark.parametrize(
    ("sampler_s", "said"),
    [
        (0.04 * 1e-3 * 1000, "the DataLoader's own code < 0.1 ms,"),  # 0.04 ms a batch
        (0.3 * 1e-3 * 1000, "the DataLoader's own code 0.3 ms,"),
    ],
)
def test_the_dataloaders_own_code_per_batch(sampler_s: float, said: str) -> None:
    assert said in _fix(sampler_s, 1000)
    assert "0.0 ms" not in _fix(sampler_s, 1000)


def test_no_measured_machinery_is_not_named() -> None:
    assert "own code" not in _fix(0.0, 1000)
