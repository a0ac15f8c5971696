"""The probe's key for a DataLoader object, with real DataLoaders: kept on the object, so a
loader built each epoch gets a key of its own even where its ``id`` is a freed one's."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainprof.probe import loader, records
from trainprof.probe.state import state
from trainprof.probe.writer import EventWriter
from trainprof.store.events import load_processes

torch = pytest.importorskip("torch")


@pytest.fixture
def writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EventWriter]:
    w = EventWriter(str(tmp_path))
    monkeypatch.setattr(records, "_writer", w)
    monkeypatch.setattr(state, "loader_keys", {})
    monkeypatch.setattr(state, "loader_count", 0)
    yield w


def test_each_loader_built_gets_its_own_key_and_config(writer: EventWriter, tmp_path: Path) -> None:
    dataset = torch.utils.data.TensorDataset(torch.zeros(8, 2))
    keys: list[int] = []
    for _ in range(4):  # one DataLoader an epoch, each freed before the next is built
        dl = torch.utils.data.DataLoader(dataset, batch_size=2)
        keys.append(loader._loader_key(dl))
        assert loader._loader_key(dl) == keys[-1]  # the same object: the same key
        del dl
        gc.collect()
    assert keys == [0, 1, 2, 3]
    writer.close()
    (log,) = load_processes(str(tmp_path))
    configs = [log.loaders[k] for k in keys]
    assert {c["dataset_id"] for c in configs} == {id(dataset)}  # one dataset, four loaders
