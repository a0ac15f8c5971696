"""py-spy's whole-tree trace split into one trace per process (attach/record.py), and the
`def` line attach names for a dataset's __getitem__ (analysis/source_lines.py), on real files."""

from __future__ import annotations

import json
from pathlib import Path

from trainprof.analysis.source_lines import def_line
from trainprof.collect.attach import record
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
    files = record.split([(raw, 0.0)], tmp_path, "/job")
    assert set(files) == {10, 11}
    main = load_spans(tmp_path / files[10][0], 100.0)
    assert main[0].frames == (("<module>", "/job/train.py", 3), ("main", "/job/train.py", 9))
    assert main[0].t0 == 100.0 and abs(main[0].t1 - 100.005) < 1e-9
    worker = load_spans(tmp_path / files[11][0], 0.0)
    assert [f[0] for f in worker[0].frames] == ["<module>", "Worker.__getitem__"]
    assert (tmp_path / files[10][0]).stat().st_mode & 0o777 == 0o600


def test_recordings_started_again_are_joined_on_the_first_ones_clock(tmp_path: Path) -> None:
    """py-spy stopped by itself and was started again 2.5 s after the first: one trace per
    process, the second recording's times moved by 2.5 s, nothing in between."""
    first = [
        _ev("B", 10, "<module>", "train.py", 3, 0),
        _ev("B", 10, "step", "train.py", 9, 0),
        _ev("E", 10, "step", "train.py", 9, 1_000_000),
        _ev("E", 10, "<module>", "train.py", 3, 1_000_000),
    ]
    second = [
        _ev("B", 10, "<module>", "train.py", 3, 0),
        _ev("B", 10, "save", "train.py", 12, 0),
        _ev("E", 10, "save", "train.py", 12, 500_000),
        _ev("E", 10, "<module>", "train.py", 3, 500_000),
    ]
    raws = [tmp_path / "a.json", tmp_path / "b.json"]
    for raw, events in zip(raws, (first, second), strict=True):
        raw.write_text(json.dumps(events))
    files = record.split([(raws[0], 50.0), (raws[1], 52.5)], tmp_path, "/job")
    assert set(files) == {10}
    spans = load_spans(tmp_path / files[10][0], 50.0)
    assert [(s.t0, s.t1, s.frames[-1][0]) for s in spans] == [
        (50.0, 51.0, "step"),
        (52.5, 53.0, "save"),
    ]


def test_a_damaged_trace_gives_nothing(tmp_path: Path) -> None:
    raw = tmp_path / "raw.json"
    raw.write_text('[{"ph": "B", "pid": 1')
    assert record.split([(raw, 0.0)], tmp_path) == {}


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


def _py_spy_events(samples: list[tuple[int, int, list[str]]]) -> list[dict[str, object]]:
    """What py-spy's Chrome trace writer (chrometrace.rs) emits for these samples (time, pid,
    frames outermost first), all of one thread id: as a forked child's main thread has its
    parent's. Each sample is written as the difference from the previous stack of that
    thread id, whatever process it was of; the end events carry the new sample's pid."""
    events: list[dict[str, object]] = []
    prev: list[str] = []
    for ts, pid, frames in samples:
        common = 0
        for a, b in zip(prev, frames, strict=False):
            if a != b:
                break
            common += 1
        events += [_frame_ev("E", pid, f, ts) for f in reversed(prev[common:])]
        events += [_frame_ev("B", pid, f, ts) for f in frames[common:]]
        prev = frames
    last_ts, last_pid, _ = samples[-1]
    return events + [_frame_ev("E", last_pid, f, last_ts + 1) for f in reversed(prev)]


def _frame_ev(ph: str, pid: int, frame: str, ts: int) -> dict[str, object]:
    if frame.startswith("process "):  # py-spy's root frames of a process, with no file
        return {**_ev(ph, pid, frame, "", 0, ts), "args": {"filename": ""}}
    return _ev(ph, pid, frame, "train.py", 1, ts)


def test_a_forked_workers_samples_do_not_pile_onto_the_jobs_stacks(tmp_path: Path) -> None:
    """The job's evaluation forward, deeper than its worker's stack: read as py-spy wrote
    them, the job's events left the worker's frames under its own (stacks of hundreds of
    frames in a Hugging Face job). Replayed, each process has its own stacks again."""
    job = ["process 10:python train.py", "<module>", "train", "evaluate", "forward", "linear"]
    job_bwd = ["process 10:python train.py", "<module>", "train", "backward"]
    worker = [
        "process 10:python train.py",
        "process 11:python train.py",
        "<module>",
        "train",
        "_worker_loop",
    ]
    samples = [
        (0, 10, job),
        (1, 11, worker),
        (2, 10, job),
        (3, 11, worker + ["__getitem__"]),
        (4, 10, job_bwd),
        (5, 11, worker),
        (6, 10, job_bwd),
    ]
    raw = tmp_path / "raw.json"
    raw.write_text(json.dumps(_py_spy_events(samples)))
    tmp = tmp_path
    files = record.split([(raw, 0.0)], tmp)
    stacks = {
        pid: [([f[0] for f in s.frames], s.t0 * 1e6, s.t1 * 1e6) for s in load_spans(tmp / n, 0.0)]
        for pid, (n, _count) in files.items()
    }
    # (the trace ends at 7, where py-spy closes the stack it holds, the job's; the worker's
    # stack ends at its last sample, 5: it may have exited since)
    assert stacks[10] == [(job[1:], 0, 4), (job_bwd[1:], 4, 7)]
    assert stacks[11] == [(worker[2:], 1, 3), (worker[2:] + ["__getitem__"], 3, 5)]
