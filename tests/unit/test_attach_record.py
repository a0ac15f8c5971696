"""py-spy's whole-tree trace split into one trace per process (attach/record.py), and the
`def` line attach names for a dataset's __getitem__ (attach/rules.py), on real files."""

from __future__ import annotations

import json
from pathlib import Path

from trainprof.attach import record
from trainprof.attach.rules import def_line
from trainprof.store.stacks import load_spans


def _ev(ph: str, pid: int, name: str, filename: str, line: int, ts: int) -> dict[str, object]:
    return {
        "ph": ph, "pid": pid, "tid": 7, "ts": ts, "name": name, "cat": "py-spy",
        "args": {"filename": filename, "line": line},
    }  # fmt: skip


def test_split_gives_each_process_its_own_trace(tmp_path: Path) -> None:
    events = [
        _ev("B", 10, "<module>", "train.py", 3, 0),
        _ev("B", 10, "main", "train.py", 9, 0),
        _ev("E", 10, "main", "train.py", 9, 5000),
        _ev("E", 10, "<module>", "train.py", 3, 5000),
        _ev("B", 11, 'process 11:"python train.py"', "", 0, 0),
        _ev("B", 11, "<module>", "train.py", 3, 0),
        _ev("B", 11, "Worker.__getitem__", "/data/ds.py", 20, 0),
        _ev("E", 11, "Worker.__getitem__", "/data/ds.py", 20, 4000),
        _ev("E", 11, "<module>", "train.py", 3, 4000),
        _ev("E", 11, 'process 11:"python train.py"', "", 0, 4000),
    ]
    raw = tmp_path / "raw.json"
    raw.write_text(json.dumps(events))
    files = record.split(raw, tmp_path, "/job")
    assert set(files) == {10, 11}
    main = load_spans(tmp_path / files[10][0], 100.0)
    assert main[0].frames == (("<module>", "/job/train.py", 3), ("main", "/job/train.py", 9))
    assert main[0].t0 == 100.0 and abs(main[0].t1 - 100.005) < 1e-9
    worker = load_spans(tmp_path / files[11][0], 0.0)
    assert [f[0] for f in worker[0].frames] == ["<module>", "Worker.__getitem__"]
    assert (tmp_path / files[10][0]).stat().st_mode & 0o777 == 0o600


def test_a_damaged_trace_gives_nothing(tmp_path: Path) -> None:
    raw = tmp_path / "raw.json"
    raw.write_text('[{"ph": "B", "pid": 1')
    assert record.split(raw, tmp_path) == {}


def test_def_line_is_the_first_line_of_the_function(tmp_path: Path) -> None:
    src = tmp_path / "ds.py"
    src.write_text(
        "class Images:\n"
        "    @staticmethod\n"
        "    def helper():\n"
        "        return 1\n"
        "\n"
        "    def __getitem__(self, i):\n"
        "        x = i * 2\n"
        "        return x\n"
    )
    assert def_line(str(src), 8, "__getitem__") == 6
    assert def_line(str(src), 4, "helper") == 2  # its decorator, as co_firstlineno
    assert def_line(str(src), 8, "missing") == 8
    assert def_line(str(tmp_path / "gone.py"), 5, "f") == 5
