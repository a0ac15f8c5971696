"""`trainprof attach` on GPU zoo jobs already running; skipped where CUDA is missing.

attach has no probe: it knows the job trains on CUDA when NVML lists a process of the job on
a GPU, and then judges host time as `run` does: what the host does while the GPU is busy
costs nothing (the healthy bf16 control, whose main thread waits in ``loss.item()`` each step,
gets no warning), and a GPU that waits for data is input-bound. Where NVML lists no process
of the job (a container's PID namespace), the GPU is not assumed to be the job's: skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_rules_ran, repeated, trainprof_cmd
from gpu_helpers import cuda_available, gpu_env

from trainprof.examples.zoo import script_path

pytestmark = pytest.mark.skipif(not cuda_available(), reason="no CUDA device")


def attached(name: str, tmp: Path, ready: str = "epoch 0") -> dict[str, Any]:
    """The zoo script started in the background (three times over, in one process), attached
    for 5 s once it printed ``ready``; the JSON report."""
    log = tmp / f"{name}.out"
    with open(log, "w") as out:
        job = subprocess.Popen(
            repeated(script_path(name)),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=gpu_env(),
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 120
        while ready not in log.read_text():
            assert job.poll() is None, f"{name} exited {job.returncode}: {log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"{name} never printed {ready!r}"
            time.sleep(0.2)
        report = tmp / f"{name}.json"
        done = subprocess.run(
            trainprof_cmd(
                "attach",
                str(job.pid),
                "--duration",
                "5",
                "--quiet",
                "--json",
                str(report),
                "--run-dir",
                str(tmp / name),
            ),  # fmt: skip
            capture_output=True,
            text=True,
            timeout=120,
            env=gpu_env(),
        )
        assert done.returncode == 0, done.stderr[-3000:]
        kept = os.environ.get("GPU_CHECK_ARTIFACTS")
        if kept:
            Path(kept).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(report, Path(kept) / f"attach_{name}.json")
        data: dict[str, Any] = json.loads(report.read_text())
        return data
    finally:
        try:
            os.killpg(job.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        job.wait()


def problems(report: dict[str, Any]) -> list[str]:
    return [f"{f['id']}: {f['title']}" for f in report["findings"] if f["severity"] != "info"]


def listed_on_its_gpu(report: dict[str, Any]) -> None:
    gpus = report["summary"]["gpus"]
    if gpus is None or gpus["by"] != "pid":
        pytest.skip(f"NVML lists no process of the job on a GPU ({gpus}): not assumed its")


def test_the_healthy_control_attached_gets_no_warning(tmp_path: Path) -> None:
    report = attached("gpu_healthy", tmp_path)
    listed_on_its_gpu(report)
    assert report["summary"]["gpu_util_mean"] is not None
    assert problems(report) == [], json.dumps(report["findings"], indent=1)[:4000]
    assert_rules_ran(report)


def test_a_gpu_job_waiting_for_data_attached_is_input_bound(tmp_path: Path) -> None:
    report = attached("gpu_input_bound", tmp_path, ready="epoch 6:")
    listed_on_its_gpu(report)
    found = problems(report)
    assert found and found[0].startswith("input-bound:"), found
