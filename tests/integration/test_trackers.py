"""--mlflow and --wandb, for real: MLflow's file store read back with MlflowClient, and W&B's
offline run directories read back from their files and their ``.wandb`` record log. The job's
own run gets trainprof's metrics, findings and HTML report; a job with none, a run of
trainprof's own; without the extra installed, the option names it in one line."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import trainprof_cmd, write_script

pytestmark = [pytest.mark.slow, pytest.mark.parallel]

DATA = Path(__file__).parents[1] / "data"

mlflow_client = pytest.importorskip("mlflow.tracking")
wandb_records = pytest.importorskip("wandb.proto.wandb_internal_pb2")

# A job that saves a checkpoint every few steps (a finding to carry), inside its own MLflow run
# (a relative file store, which MLflow 3 asks the job to opt in to) and its own offline W&B run.
JOB = """
    import os, time, torch
    import mlflow, wandb
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    mlflow.set_tracking_uri("file:mlruns")
    model = torch.nn.Linear(256, 256)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    wb = wandb.init(project="job-project", name="the-job")
    with mlflow.start_run(run_name="the-job") as run:
        for step in range(300):
            loss = model(torch.randn(32, 256)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 10 == 9:
                torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, "ckpt.pt")
                time.sleep(0.2)  # an upload after each save: a stall every 10 steps, found
        mlflow.log_metric("loss", float(loss))
        wandb.log({"loss": float(loss)})
    wb.finish()
    print("mlflow", run.info.run_id, "wandb", wb.id)
"""

PLAIN_JOB = """
    import torch
    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(60):
        loss = model(torch.randn(32, 16)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def _env(tmp: Path) -> dict[str, str]:
    """W&B offline, all its folders under ``tmp``: nothing reaches the network or home."""
    return {
        **os.environ,
        "WANDB_MODE": "offline",
        "WANDB_DIR": str(tmp / "wandb-dir"),
        "WANDB_CONFIG_DIR": str(tmp / "wandb-config"),
        "WANDB_CACHE_DIR": str(tmp / "wandb-cache"),
        "WANDB_DATA_DIR": str(tmp / "wandb-data"),
        "WANDB_SILENT": "true",
    }


def _records(path: Path) -> Iterator[Any]:
    """The records of a ``.wandb`` file: W&B's header, then LevelDB-log chunks in 32 KiB
    blocks, each record one of wandb's own protocol buffers (wandb ships no Python reader)."""
    data = path.read_bytes()
    assert data[:4] == b":W&B", data[:7]
    pos, buf = 7, b""
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768
        if left < 7:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0:  # the block's zero padding
            pos += left
            continue
        buf += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a full record, or the last chunk of one
            yield wandb_records.Record.FromString(buf)
            buf = b""


def _summary(run_dir: Path) -> dict[str, Any]:
    """The summary an offline W&B run directory holds: its summary updates, in order."""
    (log,) = run_dir.glob("run-*.wandb")
    out: dict[str, Any] = {}
    for record in _records(log):
        if record.WhichOneof("record_type") == "summary":
            for item in record.summary.update:
                key = item.key or "/".join(item.nested_key)
                out[key] = json.loads(item.value_json)
    return out


def _display_name(run_dir: Path) -> str:
    (log,) = run_dir.glob("run-*.wandb")
    for record in _records(log):
        if record.WhichOneof("record_type") == "run":
            return str(record.run.display_name)
    raise AssertionError(f"no run record in {log}")


def _check_wandb_run(run_dir: Path, report: dict[str, Any]) -> None:
    summary = _summary(run_dir)
    assert summary["trainprof/steps_per_s"] == pytest.approx(report["summary"]["steps_per_s"])
    assert summary["trainprof/steps"] == report["summary"]["steps"]
    assert summary["trainprof/findings"]["_type"] == "table-file"
    (table,) = (run_dir / "files").glob("media/table/trainprof/findings_*.table.json")
    rows = json.loads(table.read_text())
    assert [r[1] for r in rows["data"]] == [f["id"] for f in report["findings"]]
    (page,) = (run_dir / "files").glob("media/html/trainprof/report_*.html")
    assert "<h1>trainprof report" in page.read_text()


def _check_mlflow_run(client: Any, run_id: str, report: dict[str, Any]) -> None:
    run = client.get_run(run_id)
    assert run.data.metrics["trainprof/steps"] == report["summary"]["steps"]
    assert run.data.metrics["trainprof/steps_per_s"] == pytest.approx(
        report["summary"]["steps_per_s"]
    )
    assert report["summary"]["gpu_util_mean"] is None  # no GPU here: not measured, so absent
    assert "trainprof/gpu_util_mean_percent" not in run.data.metrics
    ids = [f["id"] for f in report["findings"]]
    assert run.data.tags["trainprof.findings"] == (",".join(ids) or "none")
    artifacts = {a.path for a in client.list_artifacts(run_id, "trainprof")}
    assert artifacts == {"trainprof/findings.md", "trainprof/report.html", "trainprof/report.json"}
    local = Path(client.download_artifacts(run_id, "trainprof"))
    findings = (local / "findings.md").read_text()
    for i, finding_id in enumerate(ids, 1):
        assert f"## {i}. {finding_id} (" in findings, findings
    assert "<h1>trainprof report" in (local / "report.html").read_text()
    assert json.loads((local / "report.json").read_text())["findings"] == report["findings"]


def test_the_job_s_own_mlflow_and_wandb_runs_get_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One job in both trackers, under `run --mlflow --wandb`: each of its runs, read back with
    the tracker's own reader, holds trainprof's numbers, findings and page."""
    script = write_script(tmp_path, "job.py", JOB)
    proc = subprocess.run(
        trainprof_cmd(
            "run", "-q", "--no-stacks", "--run-dir", "run", "--mlflow", "--wandb", str(script)
        ),
        cwd=tmp_path,
        env={k: v for k, v in _env(tmp_path).items() if k != "MLFLOW_ALLOW_FILE_STORE"},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    words = proc.stdout.split()
    assert words[0] == "mlflow" and words[2] == "wandb", proc.stdout
    mlflow_id, wandb_id = words[1], words[3]
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["findings"], "the checkpoint saves are a finding to carry"
    assert f"to the job's run {mlflow_id}" in proc.stderr, proc.stderr
    assert f"to the job's run {wandb_id}" in proc.stderr, proc.stderr

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # reading the job's file store
    client = mlflow_client.MlflowClient((tmp_path / "mlruns").as_uri())
    (only,) = client.search_runs(["0"])  # the job's run, no run of trainprof's beside it
    assert only.info.run_id == mlflow_id and only.data.metrics["loss"] >= 0
    _check_mlflow_run(client, mlflow_id, report)

    runs = sorted((tmp_path / "wandb-dir" / "wandb").glob(f"offline-run-*-{wandb_id}"))
    assert len(runs) == 2, runs  # the job's offline run, and trainprof's resume of it
    assert "loss" in _summary(runs[0]) and "trainprof/steps" not in _summary(runs[0])
    _check_wandb_run(runs[1], report)


def test_a_stored_run_of_a_job_with_no_tracker_gets_runs_of_trainprof_s_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`report RUN --mlflow --wandb`: where the environment points MLflow and W&B."""
    script = write_script(tmp_path, "job.py", PLAIN_JOB)
    env = {
        **_env(tmp_path),
        "MLFLOW_TRACKING_URI": (tmp_path / "store").as_uri(),
        "MLFLOW_EXPERIMENT_NAME": "profiled",
        "MLFLOW_ALLOW_FILE_STORE": "true",
        "WANDB_PROJECT": "profiled",
    }
    run = subprocess.run(
        trainprof_cmd("run", "-q", "--no-stacks", "--run-dir", "run", str(script)),
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    proc = subprocess.run(
        trainprof_cmd("report", "run", "--mlflow", "--wandb"),
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("to a run of trainprof's own") == 2, proc.stderr
    report = json.loads((tmp_path / "run" / "report.json").read_text())

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    client = mlflow_client.MlflowClient((tmp_path / "store").as_uri())
    experiment = client.get_experiment_by_name("profiled")
    (mine,) = client.search_runs([experiment.experiment_id])
    assert mine.info.run_name == "trainprof run" and mine.info.status == "FINISHED"
    _check_mlflow_run(client, mine.info.run_id, report)

    (wb,) = (tmp_path / "wandb-dir" / "wandb").glob("offline-run-*")
    assert _display_name(wb) == "trainprof run"
    _check_wandb_run(wb, report)


def test_wandb_without_a_login_says_so_and_asks_nothing(tmp_path: Path) -> None:
    """A stored run (recorded in tests/data), W&B online and no credentials: one line after the
    report, the command's exit code unchanged, no prompt (stdin closed) and no run written."""
    run_dir = tmp_path / "run"
    shutil.copytree(DATA / "runs" / "checkpoint_stall", run_dir)
    env = {k: v for k, v in _env(tmp_path).items() if not k.startswith("WANDB_API")}
    env.update(HOME=str(tmp_path), WANDB_MODE="online")
    proc = subprocess.run(
        trainprof_cmd("report", str(run_dir), "--wandb"),
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "trainprof: --wandb: not logged in to W&B (wandb login, or WANDB_MODE=offline); "
        "nothing added"
    ), proc.stderr
    assert not (tmp_path / "wandb-dir").exists()
