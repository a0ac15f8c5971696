"""Session.load reads attach's record into Session.sampled: every stack file it names, by pid,
each read once; a damaged record reads as unknown values, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trainprof.store.sampled import DEFAULT_RATE_HZ, read
from trainprof.store.session import Session

SCRIPT = "/home/user/proj/train.py"


def trace(path: Path, lines: list[int]) -> None:
    """A py-spy trace (Chrome's format) of a main thread: one stack per line, 10 ms each."""
    events: list[dict[str, Any]] = []
    for i, line in enumerate(lines):
        t = i * 10_000
        frames = [("<module>", 1), ("step", line)]
        events += [
            {"ph": "B", "ts": t, "tid": 1, "name": n, "args": {"filename": SCRIPT, "line": ln}}
            for n, ln in frames
        ]
        events += [
            {"ph": "E", "ts": t + 10_000, "tid": 1, "name": n, "args": {"filename": SCRIPT}}
            for n, _ln in reversed(frames)
        ]
    path.write_text(json.dumps(events))


def run_dir(tmp_path: Path, attach: object) -> Path:
    meta: dict[str, Any] = {"command": ["python", "train.py"], "pid": 10, "attach": attach}
    if isinstance(attach, dict) and attach.get("targets"):
        main = attach["targets"][0]
        meta["stacks"] = {"pid": 10, "chunks": [{"file": main["file"], "started_at": 5.0}]}
    (tmp_path / "run.json").write_text(json.dumps(meta))
    return tmp_path


def test_each_sampled_process_and_worker_gets_its_own_stacks(tmp_path: Path) -> None:
    trace(tmp_path / "stacks-10.json", [3, 4, 5])
    trace(tmp_path / "stacks-11.json", [7, 8])
    trace(tmp_path / "stacks-20.json", [30])
    trace(tmp_path / "stacks-20b.json", [31, 32])
    trace(tmp_path / "stacks-21.json", [40, 41, 42, 43])
    record = {
        "pid": 10,
        "given_pid": 9,
        "note": "pid 9 is torchrun: its ranks were sampled",
        "rate_hz": 250,
        "duration_s": 4,
        "targets": [
            {"pid": 10, "rank": 0, "file": "stacks-10.json", "started_at": 5.0},
            {"pid": 11, "rank": 1, "file": "stacks-11.json", "started_at": 6.0},
            {"pid": 12, "rank": 2, "file": None, "py_spy_restarts": 2},
        ],
        "workers": [
            {"pid": 20, "parent": 10, "file": "stacks-20.json"},
            {"pid": 21, "parent": 11, "file": "stacks-21.json"},
            {"pid": 20, "parent": 10, "file": "stacks-20b.json"},
        ],
        "target_exit": None,
        "io_bytes": [100, 4196],
    }
    s = Session.load(run_dir(tmp_path, record))
    got = s.sampled
    assert got is not None
    assert (got.pid, got.given_pid, got.note) == (10, 9, record["note"])
    assert (got.rate_hz, got.duration_s, got.io_bytes) == (250, 4.0, (100, 4196))
    assert [(p.pid, p.role, len(p.spans)) for p in got.processes] == [
        (10, "rank 0", 3),
        (11, "rank 1", 2),
        (12, "rank 2", 0),
    ]
    assert got.processes[2].py_spy_restarts == 2
    assert got.processes[1].spans[0].t0 == 6.0  # on the clock its recording started at
    assert got.processes[1].spans[0].frames[-1] == ("step", SCRIPT, 7)
    by_pid = got.worker_spans()
    assert sorted(by_pid) == [20, 21]
    assert [sp.frames[-1][2] for sp in by_pid[20]] == [30, 31, 32]  # both its files, in order
    assert len(by_pid[21]) == 4
    assert len(got.workers) == 3  # one per file, as recorded
    # the main process's trace is the run's stacks too: read once
    assert got.main is not None and got.main.spans[0] is s.spans[0]


def test_a_run_without_the_record_has_nothing_sampled(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text(json.dumps({"command": ["python", "t.py"], "pid": 3}))
    assert Session.load(tmp_path).sampled is None
    assert Session.load(run_dir(tmp_path, ["not", "a", "record"])).sampled is None


def test_a_damaged_record_reads_as_unknown(tmp_path: Path) -> None:
    trace(tmp_path / "stacks-10.json", [3])
    record = {
        "pid": "ten",
        "rate_hz": "fast",
        "targets": [
            "junk",
            {"pid": True, "rank": False, "file": "../../stacks-10.json", "started_at": "x"},
            {"pid": 12, "file": ".."},
        ],
        "workers": {"pid": 20},
        "io_bytes": [None, 7],
        "note": 3,
    }
    got = read(record, tmp_path)
    assert got is not None
    assert (got.pid, got.given_pid, got.note, got.io_bytes) == (None, None, None, None)
    assert got.rate_hz == DEFAULT_RATE_HZ
    first, second = got.processes
    # a path in the record is read by its name, inside the run directory only
    assert (first.pid, first.rank, first.role, len(first.spans)) == (0, None, "main", 1)
    assert first.spans[0].t0 == 0.0
    assert (second.pid, second.spans) == (12, ())
    assert got.workers == ()
