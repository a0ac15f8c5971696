"""The job's models as the probe finds them at the first optimizer step (probe/models.py): what
the frames that step the optimizer hold, by the names they give them, top-level ones only."""

from __future__ import annotations

import torch
from torch import nn

from trainprof.probe import models


class Trainer:
    def __init__(self) -> None:
        self.model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
        self.criterion = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)

    def step(self) -> models.Found:
        head = self.model[1]  # a submodule held too: not a model of its own
        assert head is not None
        return models.found(torch, None, self.optimizer)


def test_a_trainers_models_and_optimizer_are_found_one_attribute_deep() -> None:
    found = Trainer().step()
    names = [name for name, _m in found.models]
    assert names[:2] == ["self.model", "self.criterion"], names
    assert "head" not in names
    assert found.optimizer_name == "self.optimizer"


def test_the_module_train_was_called_on_comes_first_by_its_frame_name() -> None:
    net, other = nn.Linear(4, 4), nn.Linear(2, 2)
    found = models.found(torch, net, None)
    assert found.models[0] == ("net", net)
    assert ("other", other) in found.models
    assert found.optimizer_name is None  # none asked for, none named


def test_the_main_model_holds_most_of_the_stepped_optimizers_weights() -> None:
    small, big = nn.Linear(2, 2), nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    opt = torch.optim.SGD(big.parameters(), lr=0.1)
    found = [("small", small), ("big", big)]
    assert models.main_model(found, None, opt) is big
    assert models.main_model(found, small, opt) is small  # train() decides where it was called
    assert models.main_model([("small", small)], None, opt) is None
