"""What --mlflow and --wandb send: only measured numbers, findings rows in the report's order,
and the job's relative MLflow store found from the job's working directory."""

from __future__ import annotations

from typing import Any

import pytest

from trainprof.export import run_summary
from trainprof.export.mlflow_run import _absolute

REPORT: dict[str, Any] = {
    "summary": {
        "steps": 430,
        "steps_per_s": 141.4,
        "samples_per_s": None,  # not measured
        "step_time_s": {"p50": 0.0014, "p95": 0.057},
        "data_wait_frac": 0.0,  # measured: none
        "peak_memory": {"bytes": 386678784},
        "gpu_util_mean": None,
        "mfu": None,
        "trainprof_cpu_percent_mean": 2.0,
        "trainprof_cost": {"machine_share": None},
        "bottleneck": {"verdict": "input-bound"},
    },
    "findings": [
        {
            "id": "checkpoint-stall",
            "severity": "warning",
            "impact": 0.76,
            "title": "Saves",
            "where": "train.py:12",
            "fix": ["save less often", "save asynchronously"],
            "evidence": ["42 saves"],
        },
        {"id": "leak", "severity": "info", "impact": None, "title": "Memory grows", "fix": []},
    ],
}


def test_only_measured_numbers_are_sent_and_a_measured_zero_is_kept() -> None:
    got = run_summary.metrics(REPORT)
    assert got == {
        "trainprof/steps": 430.0,
        "trainprof/steps_per_s": 141.4,
        "trainprof/step_time_p50_s": 0.0014,
        "trainprof/step_time_p95_s": 0.057,
        "trainprof/data_wait_share": 0.0,
        "trainprof/peak_memory_bytes": 386678784.0,
        "trainprof/cost_cpu_percent_mean": 2.0,
        "trainprof/findings": 2.0,
    }
    assert run_summary.verdict(REPORT) == "input-bound"
    assert run_summary.metrics({}) == {"trainprof/findings": 0.0}


def test_findings_are_rows_and_markdown_in_the_report_s_order() -> None:
    rows = run_summary.finding_rows(REPORT)
    assert [r[:4] for r in rows] == [
        [1, "checkpoint-stall", "warning", 0.76],
        [2, "leak", "info", None],
    ]
    assert rows[0][5:] == ["train.py:12", "save less often; save asynchronously"]
    text = run_summary.findings_markdown(REPORT)
    assert "## 1. checkpoint-stall (warning, 76% of the time)" in text
    assert "## 2. leak (info)" in text
    assert "- where: `train.py:12`" in text and "- 42 saves" in text
    assert run_summary.findings_markdown({"findings": []}).startswith("trainprof found no problem")


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("file:mlruns", "file:///job/dir/mlruns"),
        ("file:./mlruns", "file:///job/dir/mlruns"),
        ("mlruns", "file:///job/dir/mlruns"),
        ("file:///data/mlruns", "file:///data/mlruns"),
        ("/data/mlruns", "/data/mlruns"),
        ("sqlite:///mlflow.db", "sqlite:////job/dir/mlflow.db"),
        ("sqlite:////data/mlflow.db", "sqlite:////data/mlflow.db"),
        ("http://tracking:5000", "http://tracking:5000"),
        ("databricks", "databricks"),
    ],
)
def test_a_relative_store_is_the_job_s(uri: str, expected: str) -> None:
    assert _absolute(uri, "/job/dir") == expected
