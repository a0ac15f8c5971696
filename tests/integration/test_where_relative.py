"""A finding's file:line is one string in every view: relative to the run's working directory
where the file lies under it, in the console, report.json, the HTML page and the trace alike;
the zoo's scripts, run from elsewhere, keep their absolute path (tests/integration/test_zoo.py).

The cpu-stall zoo script, copied into the directory trainprof runs in, run once for real."""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

import pytest
from conftest import run_trainprof

from trainprof.examples.zoo import script_path

pytestmark = pytest.mark.slow


def test_the_where_of_a_script_in_the_working_directory_is_relative_everywhere(
    tmp_path: Path,
) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    shutil.copy(script_path("cpu_stall"), proj / "cpu_stall.py")
    r = run_trainprof(
        proj,
        "cpu_stall.py",
        run_args=("--trace", "views/trace.json", "--html", "views/report.html"),
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.report is not None
    first = r.report["findings"][0]
    assert first["id"] == "cpu-stall", first
    where = first["where"]
    assert where.startswith("cpu_stall.py:") and "(main → refresh_pseudo_labels())" in where, where
    assert first["hotspot"].startswith("cpu_stall.py:"), first["hotspot"]
    # the console says the same
    assert f"where: {where}" in " ".join(r.stderr.replace("│", " ").split()), r.stderr
    # the HTML page
    page = (proj / "views" / "report.html").read_text()
    assert f"where: <code>{html.escape(where)}</code>" in page
    # the trace's stalls
    events = json.loads((proj / "views" / "trace.json").read_text())["traceEvents"]
    stalls = [e for e in events if e.get("cat") == "stall" and "where" in e.get("args", {})]
    assert stalls and {e["args"]["where"] for e in stalls} == {where}, stalls[:2]
    located = [f[k] for f in r.report["findings"] for k in ("where", "hotspot") if f[k]]
    assert located and not any(str(proj) in w for w in located), located
