"""The samples a DataLoader batch holds, as the probe's ``__next__`` wrapper counts them (for
samples/s): the common batches (a tensor, a list or tuple led by one) are read inline, every
other shape by ``batches.leading_dim``; both must give the leading dimension of the first tensor."""

from __future__ import annotations

import types
from typing import Any

import numpy as np
import pytest
import torch

from trainprof.probe import batches, loader
from trainprof.probe.state import State, state


@pytest.mark.parametrize(
    ("batch", "samples"),
    [
        (torch.zeros(8, 3), 8),
        ((torch.zeros(5, 3), torch.zeros(5)), 5),
        ([torch.zeros(7), torch.zeros(7)], 7),
        ({"input_ids": torch.zeros(4, 16), "labels": torch.zeros(4)}, 4),
        ([{"x": torch.zeros(6, 2)}], 6),  # a list led by a dict: leading_dim's walk
        (np.zeros((3, 2)), 3),
        ((np.zeros((9,)), 1), 9),
        (torch.tensor(1.0), 1),  # a scalar: one sample
        ([], 0),  # nothing to count: -1, so no samples added
        (("text", torch.zeros(2)), 0),  # led by a non-tensor: not counted
    ],
)
def test_the_wrapper_counts_the_first_tensors_leading_dim(
    monkeypatch: pytest.MonkeyPatch, batch: Any, samples: int
) -> None:
    class Iter:
        def __next__(self) -> Any:
            return batch

        def _next_index(self) -> list[int]:
            return []

    class Loader:
        def __iter__(self) -> Iter:
            return Iter()

    fresh = State()  # a new process's, in place: the hook modules hold the one by name
    for name in State.__slots__:
        monkeypatch.setattr(state, name, getattr(fresh, name))
    loader._wrap_loader(types.SimpleNamespace(_BaseDataLoaderIter=Iter, DataLoader=Loader))
    it = Iter()
    next(it)
    next(it)
    assert state.samples == 2 * samples
    assert batches.leading_dim(batch) == (samples if samples else -1)
