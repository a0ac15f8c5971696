"""Contention read as contention, on real jobs: the zoo's job beside a neighbour's busy loops
leads with the wait for a CPU (the ledger's bucket, the verdict, cpu-starved's share); the same
job pinned with taskset to one CPU is judged on 1; compare says when two runs' loads differ.

The machine may be busy with other work besides: each assertion reads the load the run itself
measured, never an idle machine's numbers.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import Result, ZooRun, run_trainprof, trainprof_cmd

from trainprof.compare.diff import WAIT_APART
from trainprof.examples.zoo import script_path


def _waited(report: dict[str, Any]) -> float:
    load = report["summary"]["cpu_load"]
    assert load is not None, "the main thread's wait for a CPU was not read"
    return float(load["waited"])


@pytest.fixture(scope="module")
def pinned_alone(tmp_path_factory: pytest.TempPathFactory) -> Result:
    """The job with no neighbour, started as `taskset -c 0 python ...` under trainprof."""
    if shutil.which("taskset") is None or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs taskset and 2 CPUs")
    cpu = min(os.sched_getaffinity(0))
    r = run_trainprof(
        tmp_path_factory.mktemp("pinned"),
        "--",
        "taskset",
        "-c",
        str(cpu),
        sys.executable,
        str(script_path("beside_busy_loop")),
        env={**os.environ, "ZOO_NEIGHBOURS": "0", "ZOO_SECONDS": "3"},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.report is not None
    return r


def test_a_job_beside_busy_loops_leads_with_its_wait_for_a_cpu(zoo_run: ZooRun) -> None:
    r = zoo_run("beside_busy_loop")
    assert r.returncode == 0, r.stderr[-3000:]
    report = r.report
    load = report["summary"]["cpu_load"]
    assert load["others_cpus"] >= 1.0, load  # the neighbour's loops, as measured
    waited = _waited(report)
    assert waited >= 0.2, load
    buckets = report["ledger"]["buckets"]
    share = buckets["cpu_wait"]["share"] + buckets.get("stall_wait", {}).get("share", 0.0)
    assert share == pytest.approx(waited, abs=0.03), (buckets, load)
    assert max(buckets, key=lambda b: buckets[b]["share"]) == "cpu_wait", buckets
    verdict = report["summary"]["bottleneck"]
    assert verdict["verdict"] == "cpu-starved", verdict
    assert verdict["reason"].startswith("the job got "), verdict
    assert "other processes used" in verdict["reason"]
    first = report["findings"][0]
    assert first["id"] == "cpu-starved"
    assert first["impact"] == pytest.approx(share, abs=0.01)
    console = " ".join(re.sub("[│╭╮╰╯─]", " ", r.stderr).split())
    assert "bottleneck cpu-starved: the job got" in console, r.stderr[-3000:]


def test_a_job_pinned_to_one_cpu_is_judged_on_one(pinned_alone: Result) -> None:
    report = pinned_alone.report
    assert report["settings"]["usable_cpus"] == 1
    assert report["summary"]["trainprof_cost"]["usable_cpus"] == 1
    assert report["summary"]["cpu_load"]["usable_cpus"] == 1
    run_json = json.loads((pinned_alone.run_dir / "run.json").read_text())
    assert run_json["usable_cpus"] == 1


def test_compare_says_the_runs_had_different_load(
    zoo_run: ZooRun, pinned_alone: Result, tmp_path: Path
) -> None:
    loaded = zoo_run("beside_busy_loop")
    out = tmp_path / "compare.json"
    done = subprocess.run(
        trainprof_cmd(
            "compare", str(pinned_alone.run_dir), str(loaded.run_dir), "--json", str(out)
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    c = json.loads(out.read_text())
    assert {"key": "usable_cpus", "a": 1, "b": 2} in c["settings_differ"]
    wa, wb = c["a"]["load"]["waited"], c["b"]["load"]["waited"]
    assert wa == pytest.approx(_waited(pinned_alone.report))
    assert wb == pytest.approx(_waited(loaded.report))
    apart = abs(wb - wa) >= WAIT_APART or (
        abs(c["b"]["load"]["others_cpus"] - c["a"]["load"]["others_cpus"]) >= 0.5
    )
    assert (c["load_note"] is not None) == apart, c
    if apart:
        assert "very different load" in c["load_note"]
        assert "very different load" in done.stdout + done.stderr
    assert c["batch_note"] is None, "the same batch size: it/s stays comparable"
