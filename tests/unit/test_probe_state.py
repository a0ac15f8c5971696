"""ProbeWatch: the one line said while a job runs when none of its processes loaded the probe,
on real processes (the thresholds shortened, not the processes faked)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainprof.collect import probe_state
from trainprof.collect.probe_state import ProbeWatch
from trainprof.store.schema import PROBE_FAILED, PROBE_LOADED


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe_state, "SILENT_PYTHON_S", 0.3)
    monkeypatch.setattr(probe_state, "LOOK_EVERY_S", 0.0)


def spawn(*argv: str) -> Iterator[subprocess.Popen[bytes]]:
    p = subprocess.Popen(argv)
    try:
        yield p
    finally:
        p.kill()
        p.wait()


@pytest.fixture
def silent_python() -> Iterator[subprocess.Popen[bytes]]:
    """A Python without the probe (-I: no PYTHONPATH, so no bootstrap)."""
    yield from spawn(sys.executable, "-I", "-c", "import time; time.sleep(60)")


@pytest.fixture
def not_python() -> Iterator[subprocess.Popen[bytes]]:
    yield from spawn("sleep", "60")


def said(watch: ProbeWatch, checks: int = 1) -> list[str]:
    lines: list[str] = []
    for _ in range(checks):
        watch.check(lines.append)
    return lines


def test_the_bootstrap_s_error_is_said_once(tmp_path: Path) -> None:
    (tmp_path / PROBE_FAILED).write_text("ImportError: a stale copy (Python 3.12.1)")
    lines = said(ProbeWatch(tmp_path, 1, already_said=False), checks=3)
    assert lines == [
        "trainprof: the job's Python could not start the probe: ImportError: a stale copy "
        "(Python 3.12.1); the report will have host metrics only"
    ]


def test_a_python_that_runs_without_the_probe_is_named(
    tmp_path: Path, quick: None, silent_python: subprocess.Popen[bytes]
) -> None:
    watch = ProbeWatch(tmp_path, silent_python.pid, already_said=False)
    time.sleep(0.4)  # older than the (shortened) threshold
    lines = said(watch, checks=2)
    assert len(lines) == 1 and f"(pid {silent_python.pid}) of the job has run for" in lines[0]
    assert lines[0].startswith("trainprof: python"), lines


def test_nothing_is_said_when_the_probe_loaded_or_no_python_runs(
    tmp_path: Path,
    quick: None,
    silent_python: subprocess.Popen[bytes],
    not_python: subprocess.Popen[bytes],
) -> None:
    time.sleep(0.4)
    assert said(ProbeWatch(tmp_path, not_python.pid, already_said=False), checks=2) == []
    # the command's own flags said it at the start (python -I train.py): not again
    assert said(ProbeWatch(tmp_path, silent_python.pid, already_said=True)) == []
    (tmp_path / PROBE_LOADED).touch()  # another process of the job loaded it
    (tmp_path / PROBE_FAILED).write_text("ImportError: x")
    assert said(ProbeWatch(tmp_path, silent_python.pid, already_said=False)) == []
