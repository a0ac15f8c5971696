"""The probe's record of what the main process's first batch holds, with real torch
DataLoaders: numpy arrays from a collate_fn of one's own, tensors from the default collate."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from trainprof.probe import batch_kind, records
from trainprof.probe.writer import EventWriter
from trainprof.store.events import load_processes

torch = pytest.importorskip("torch")
fetch_mod = pytest.importorskip("torch.utils.data._utils.fetch")


class Rows(torch.utils.data.Dataset):  # type: ignore[misc]
    def __len__(self) -> int:
        return 32

    def __getitem__(self, i: int) -> tuple[np.ndarray, int]:
        return np.full(16, i, dtype=np.float32), i % 2


def numpy_collate(samples: list[tuple[np.ndarray, int]]) -> tuple[np.ndarray, np.ndarray]:
    return np.stack([x for x, _ in samples]), np.array([y for _, y in samples])


@pytest.fixture
def writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EventWriter]:
    w = EventWriter(str(tmp_path))
    monkeypatch.setattr(records, "_writer", w)
    for cls in (fetch_mod._MapDatasetFetcher, fetch_mod._IterableDatasetFetcher):
        monkeypatch.setattr(cls, "fetch", cls.fetch)  # restored after the test
    yield w


def _kinds(w: EventWriter, folder: Path) -> list[dict[str, int]]:
    w.close()
    (log,) = load_processes(str(folder))
    return [i["batch_kind"] for i in log.infos if "batch_kind" in i]


def test_a_collate_fn_that_keeps_numpy_arrays_is_recorded_once(
    writer: EventWriter, tmp_path: Path
) -> None:
    batch_kind.install(fetch_mod)
    loader = torch.utils.data.DataLoader(Rows(), batch_size=8, collate_fn=numpy_collate)
    for _ in loader:
        pass
    assert _kinds(writer, tmp_path) == [
        {"tensors": 0, "arrays": 2, "other": 0, "array_bytes": 8 * 16 * 4 + 8 * 8}
    ]
    assert fetch_mod._MapDatasetFetcher.fetch.__name__ == "fetch"  # the wrapper went away


def test_the_default_collate_makes_tensors_of_numpy_samples(
    writer: EventWriter, tmp_path: Path
) -> None:
    batch_kind.install(fetch_mod)
    for _ in torch.utils.data.DataLoader(Rows(), batch_size=8):
        pass
    assert _kinds(writer, tmp_path) == [{"tensors": 2, "arrays": 0, "other": 0, "array_bytes": 0}]


def test_nested_objects_are_counted_by_leaf() -> None:
    batch = {"ids": torch.zeros(2), "text": ["a", "b"], "meta": ({"n": np.zeros(3)},)}
    assert batch_kind.kind_of(batch) == {
        "tensors": 1,
        "arrays": 1,
        "other": 2,
        "array_bytes": 24,
    }
