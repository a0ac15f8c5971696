"""An event file of a version this trainprof cannot read is said, in the console and the JSON
report, not read as a job with 0 steps: a recorded run, its event files' headers changed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from recorded import materialize, report_of

from trainprof.store.events import other_version, read_processes
from trainprof.store.schema import MAGIC, SCHEMA_VERSION


def _as_version(path: Path, version: int, magic: str = MAGIC) -> None:
    """Rewrite an event file's header as another trainprof's would be."""
    first, rest = path.read_text().split("\n", 1)
    header = first[len(MAGIC) :].replace(f'"version": {SCHEMA_VERSION}', f'"version": {version}')
    path.write_text(magic + header + "\n" + rest)


def test_a_run_all_of_another_version_says_so(tmp_path: Path) -> None:
    run_dir = materialize("healthy_loader", tmp_path)
    for path in run_dir.glob("events-*.tp"):
        _as_version(path, SCHEMA_VERSION + 1)
    data, text = report_of(run_dir, width=200)
    assert data["summary"]["steps"] is None  # not measured, not 0
    said = data["summary"]["probe_errors"][0]
    assert re.fullmatch(
        r"events-\d+\.tp, events-\d+\.tp, events-\d+\.tp: event files of version 2, which "
        r"this trainprof cannot read \(it reads version 1\): .*recorded it",
        said,
    ), said
    flat = " ".join(text.split())
    assert "steps not measured: the job's event files are of another version" in flat, text
    assert "Not judged: the job's steps are in event files of another trainprof version" in flat
    assert "0 optimizer steps" not in flat and "torch was never imported" not in flat


def test_one_file_of_another_version_beside_readable_ones(tmp_path: Path) -> None:
    run_dir = materialize("healthy_loader", tmp_path)
    paths = sorted(run_dir.glob("events-*.tp"))
    _as_version(paths[-1], 7, magic="#TP7 ")  # a future magic as well
    logs, notes = read_processes(str(run_dir))
    assert len(logs) == len(paths) - 1
    assert notes and notes[0].startswith(f"{paths[-1].name}: an event file of version 7")
    data, _text = report_of(run_dir)
    assert data["summary"]["steps"]  # the readable ones' steps are still counted
    assert notes[0] in data["summary"]["probe_errors"]


@pytest.mark.parametrize(
    ("first_line", "version"),
    [
        (f'{MAGIC}{{"version": {SCHEMA_VERSION}, "pid": 1}}', None),  # this version
        ('#TP2 {"version": 2, "pid": 1}', "2"),
        ("#TP3 not json", "3"),
        ('#TP1 {"magic": "trainprof-events", "version": 2, "argv": ["' + "x" * 9000, "2"),  # torn
        ("not an event file", None),
        ("", None),
    ],
)
def test_other_version(tmp_path: Path, first_line: str, version: str | None) -> None:
    path = tmp_path / "events-1.tp"
    path.write_text(first_line + "\n")
    assert other_version(str(path)) == version
