"""The analysis and its renderings on recorded run directories (tests/data/runs/): real zoo runs,
judged again by this trainprof without running a job, in seconds.

Each recording is a `trainprof run` of a zoo script (tests/recorded.py made them); its report's
stable parts, the problems in order and the first one's where and claims, are snapshots in
tests/data/snapshots.json. A change that moves them is either a fix, whose snapshot is written
again (`python tests/recorded.py --snapshots`) and read in the diff, or a regression.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_rules_ran
from recorded import CASES, SNAPSHOTS, materialize, report_of, stable_parts
from synth import process, session

from trainprof.analysis.pipeline import analyze
from trainprof.examples.zoo import ZOO, ZOO_DIR

NAMES = list(CASES)


@pytest.fixture(scope="module")
def analysed(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[Path, dict[str, Any], str]]:
    """Each recording copied out and analysed once: (its run directory, report, console text)."""
    parent = tmp_path_factory.mktemp("recorded")
    out = {}
    for name in NAMES:
        run_dir = materialize(name, parent)
        data, text = report_of(run_dir)
        out[name] = (run_dir, data, text)
    return out


def problems(report: dict[str, Any]) -> list[str]:
    return [f["id"] for f in report["findings"] if f["severity"] != "info"]


@pytest.mark.parametrize("name", NAMES)
def test_the_report_keeps_its_snapshot(
    name: str, analysed: dict[str, tuple[Path, dict[str, Any], str]]
) -> None:
    run_dir, data, _text = analysed[name]
    expected = json.loads(SNAPSHOTS.read_text())[name]
    got = stable_parts(data, run_dir)
    assert got["problems"] == expected["problems"], got
    if expected["first"] is None:
        assert got["first"] is None
        return
    assert (got["first"]["id"], got["first"]["where"]) == (
        expected["first"]["id"],
        expected["first"]["where"],
    )
    assert got["first"]["claims"] == pytest.approx(expected["first"]["claims"], abs=1e-3)


@pytest.mark.parametrize("name", NAMES)
def test_each_recording_is_diagnosed_as_its_zoo_case_says(
    name: str, analysed: dict[str, tuple[Path, dict[str, Any], str]]
) -> None:
    run_dir, data, _text = analysed[name]
    case = ZOO[name]
    if case.expect is None:
        assert problems(data) == [], data["findings"]
        assert_rules_ran(data)
        return
    assert problems(data)[:1] == [case.expect], data["findings"]
    first = data["findings"][0]
    assert first["evidence"] and first["fix"], first
    if first["where"] is not None:  # the user's own line, on this machine's path
        assert first["where"].startswith(str(ZOO_DIR / f"{name}.py:")), first["where"]


@pytest.mark.parametrize("name", NAMES)
def test_the_console_report_fits_80_columns_and_names_the_first_problem(
    name: str, analysed: dict[str, tuple[Path, dict[str, Any], str]]
) -> None:
    _run_dir, data, text = analysed[name]
    assert max(len(line) for line in text.splitlines()) <= 80, text
    found = problems(data)
    if found:
        assert re.search(rf"1\. \[\w+\] .*\({found[0]}\b", " ".join(text.split())), text
    assert "Traceback" not in text.split("findings")[-1], text


def test_the_step_rules_check_fails_on_a_run_they_could_not_judge(
    analysed: dict[str, tuple[Path, dict[str, Any], str]],
) -> None:
    """assert_rules_ran is what keeps a "healthy" test from passing on a run nothing judged: a
    job that crashed before its first step (recorded), and one of four steps (synthetic)."""
    _run_dir, crashed, _text = analysed["crash_shape"]
    with pytest.raises(AssertionError, match="cpu-stall skipped"):
        assert_rules_ran(crashed)
    _m, verdict = analyze(session(process(4)))
    assert verdict.findings == ()
    with pytest.raises(AssertionError, match="skipped"):
        assert_rules_ran(verdict)


def test_report_writes_json_html_and_trace_of_a_recorded_run(tmp_path: Path) -> None:
    """The real command line, on the input-bound recording."""
    run_dir = materialize("input_bound", tmp_path)
    out = {"json": tmp_path / "r.json", "html": tmp_path / "r.html", "trace": tmp_path / "t.json"}
    p = subprocess.run(
        [sys.executable, "-m", "trainprof", "report", str(run_dir)]
        + [a for k, v in out.items() for a in (f"--{k}", str(v))],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert p.returncode == 0, p.stderr
    assert "(input-bound," in " ".join(p.stdout.split()), p.stdout
    report = json.loads(out["json"].read_text())
    assert problems(report)[0] == "input-bound"
    assert json.loads((run_dir / "report.json").read_text())["findings"] == report["findings"]
    assert "input-bound" in out["html"].read_text()
    events = json.loads(out["trace"].read_text())["traceEvents"]
    assert any(e.get("name") == "step" or "step" in str(e.get("name")) for e in events)


# ---- compare, on recorded runs -------------------------------------------------------------


def compare(tmp_path: Path, a: str, b: str, columns: int) -> tuple[dict[str, Any], str, list[str]]:
    """`trainprof compare --json -` of two recordings, copied out under run directories' usual
    long names: the comparison, the console table (stderr) and the two names."""
    runs = tmp_path / "trainprof-runs"
    names = []
    for stamp, name in (("20261126-101500", a), ("20261126-103000", b)):
        run_dir = materialize(name, runs)
        report_of(run_dir)  # its report.json, as `trainprof run` leaves it
        run_dir.rename(runs / f"{stamp}-{name}")
        names.append(f"trainprof-runs/{stamp}-{name}")
    p = subprocess.run(
        [sys.executable, "-m", "trainprof", "compare", *names, "--json", "-"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": str(columns), "NO_COLOR": "1"},
    )
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout), p.stderr, names


def test_compare_lists_persistent_workers_as_a_setting_that_differs(tmp_path: Path) -> None:
    """persistent_workers=True is what a worker-startup finding advises: the comparison of a
    run before and after it must say it changed."""
    data, table, _names = compare(tmp_path, "worker_startup", "healthy_loader", 80)
    assert {"key": "persistent_workers", "a": False, "b": True} in data["settings_differ"], data
    assert "persistent_workers: False → True" in table, table
    assert "worker-startup" in data["findings"]["disappeared"]


def test_compare_lists_the_torch_thread_count_as_a_setting_that_differs(tmp_path: Path) -> None:
    """torch.set_num_threads is what a cpu-starved finding advises."""
    data, table, _names = compare(tmp_path, "oversubscribed", "healthy_loader", 80)
    assert {"key": "torch_threads", "a": 8, "b": 1} in data["settings_differ"], data
    assert "torch threads: 8 → 1" in table, table


@pytest.mark.parametrize("columns", [60, 80])
def test_compare_keeps_run_names_whole_on_a_narrow_terminal(tmp_path: Path, columns: int) -> None:
    _data, table, names = compare(tmp_path, "worker_startup", "healthy_loader", columns)
    lines = [line.rstrip() for line in table.splitlines()]
    for name in names:
        assert any(line.endswith(name) for line in lines), table
        cut = [line for line in lines for k in range(8, len(name)) if line.endswith(name[:k])]
        assert not cut, f"{name} broken at the end of: {cut}\n{table}"
