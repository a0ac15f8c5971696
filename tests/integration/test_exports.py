"""Exports to the tools users already watch, for real: TensorBoard's own reader reads the event
files trainprof writes, and an HTTP scrape of `--metrics-port` parses as OpenMetrics while the
job runs; without the extra installed, each option (these two, --mlflow and --wandb too) says in
one line which extra to install."""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import ZooRun, trainprof_cmd, write_script

from trainprof.export.tensorboard import MAX_POINTS

pytestmark = [pytest.mark.slow, pytest.mark.parallel]

tensorboard_reader = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
openmetrics = pytest.importorskip("prometheus_client.openmetrics.parser")


def _read_events(folder: Path) -> Any:
    acc = tensorboard_reader.EventAccumulator(str(folder), size_guidance={"scalars": 0})
    acc.Reload()
    return acc


def _text(acc: Any, tag: str) -> str:
    from tensorboard.util import tensor_util

    (event,) = acc.Tensors(tag)
    return str(tensor_util.make_ndarray(event.tensor_proto)[0].decode())


def test_a_stored_run_is_read_by_tensorboard_with_its_stalls_and_findings(
    zoo_run: ZooRun, tmp_path: Path
) -> None:
    """cpu_stall's run (shared with test_zoo): every step is a point, the stalled steps stand
    out, and the findings text leads with the report's first finding."""
    r = zoo_run("cpu_stall")
    assert r.returncode == 0 and r.report is not None
    out = tmp_path / "tb"
    proc = subprocess.run(
        trainprof_cmd("report", str(r.run_dir), "--tensorboard", str(out)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"event files in {out}" in proc.stderr
    acc = _read_events(out)
    steps = acc.Scalars("trainprof/step_time_ms")
    assert len(steps) == r.report["summary"]["steps"] == 210
    assert [e.step for e in steps] == list(range(210))
    times = sorted(e.value for e in steps)
    median = times[len(times) // 2]
    stalled = {e.step for e in steps if e.value > 3 * median}
    assert {29, 59, 89, 119, 149, 179, 209} <= stalled, stalled
    assert acc.Scalars("trainprof/cpu_percent"), "the host samples are a series too"
    findings = _text(acc, "trainprof/findings")
    assert findings.startswith(f"**1. {r.report['findings'][0]['id']}**"), findings
    assert "cpu-stall" in findings


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape(port: int) -> dict[str, float]:
    """One OpenMetrics scrape: each sample's name (with its labels) and value."""
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/metrics",
        headers={"Accept": "application/openmetrics-text; version=1.0.0"},
    )
    with urllib.request.urlopen(req, timeout=5) as resp:
        assert resp.headers["Content-Type"].startswith("application/openmetrics-text")
        body = resp.read().decode()
    out = {}
    for family in openmetrics.text_string_to_metric_families(body):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return out


def _until(check: Callable[[], dict[str, float] | None], timeout: float) -> dict[str, float]:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got is not None:
            return got
        assert time.monotonic() < deadline, "no scrape showed the job's steps in time"
        time.sleep(0.2)  # polling an HTTP endpoint: there is no event to wait on


JOB = """
    import os, torch
    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    step = 0
    while step < 40 or not os.path.exists(os.environ["STOP_FILE"]):
        loss = model(torch.randn(32, 16)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
    print("steps", step)
"""


def test_metrics_are_served_while_the_job_runs_and_the_port_is_freed(tmp_path: Path) -> None:
    """A job that steps until the test has scraped its steps; the same run writes TensorBoard
    event files at its end."""
    script = write_script(tmp_path, "job.py", JOB)
    stop = tmp_path / "stop"
    port = _free_port()
    proc = subprocess.Popen(
        trainprof_cmd(
            "run",
            "-q",
            "--run-dir",
            str(tmp_path / "run"),
            "--metrics-port",
            str(port),
            "--tensorboard",
            str(tmp_path / "tb"),
            str(script),
        ),
        cwd=tmp_path,
        env={**os.environ, "STOP_FILE": str(stop)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def stepping() -> dict[str, float] | None:
            try:
                got = _scrape(port)
            except OSError:
                return None  # not serving yet
            return got if got.get("trainprof_progress_total{unit=optimizer step}", 0) > 20 else None

        got = _until(stepping, timeout=90)
        assert got["trainprof_job_running"] == 1.0
        assert got["trainprof_steps_per_second"] > 0
        assert got["trainprof_stalls_total"] >= 0 and got["trainprof_stall_seconds_total"] >= 0
        assert got["trainprof_memory_rss_bytes"] > 10 * 2**20
        assert math.isfinite(got["trainprof_cpu_percent"])
    finally:
        stop.touch()
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out.startswith("steps "), out  # the job's output is its own
    with pytest.raises(ConnectionRefusedError):  # trainprof stopped serving with the job's end
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    steps = _read_events(tmp_path / "tb").Scalars("trainprof/step_time_ms")
    n = report["summary"]["steps"]  # as many as the job ran until the scrape: thousands, quiet
    assert len(steps) == math.ceil(n / math.ceil(n / MAX_POINTS)), n  # a point a block of steps


def test_a_port_in_use_is_said_before_the_job_starts(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    script = write_script(tmp_path, "job.py", f"open({str(marker)!r}, 'w').close()\n")
    with socket.socket() as busy:
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run(
            trainprof_cmd("run", "-q", "--metrics-port", str(port), str(script)),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and f"--metrics-port {port}" in proc.stderr, proc.stderr
    assert not marker.exists()


@pytest.mark.parametrize(
    ("args", "module", "extra"),
    [
        (("--tensorboard", "tb"), "tensorboard", "tensorboard"),
        (("--metrics-port", "0"), "prometheus_client", "prometheus"),
        (("--mlflow",), "mlflow", "mlflow"),
        (("--wandb",), "wandb", "wandb"),
    ],
)
def test_without_the_extra_the_option_names_it(
    tmp_path: Path, args: tuple[str, ...], module: str, extra: str
) -> None:
    """The library missing (blocked from import, as where it is not installed): one line that
    names the extra, exit 2, and the job never started."""
    marker = tmp_path / "ran"
    script = write_script(tmp_path, "job.py", f"open({str(marker)!r}, 'w').close()\n")
    body = (
        f"import sys; sys.modules[{module!r}] = None\n"
        "from trainprof.console_script import main\n"
        "sys.argv = ['trainprof', *sys.argv[1:]]\n"
        "main()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", body, "run", "-q", *args, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert f"pip install 'trainprof[{extra}]'" in proc.stderr
    assert proc.stderr.strip().count("\n") == 0, proc.stderr
    assert not marker.exists()
