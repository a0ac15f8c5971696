"""A job stopped by a signal (SIGSTOP, Ctrl-Z) and continued is not a hung job."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import trainprof_cmd, write_script

pytestmark = [pytest.mark.slow, pytest.mark.parallel]  # judges no timing or load (CONTRIBUTING)
STOPPED_FOR_S = 6.0  # over --hang-after 2 and the watch's 2 s of looks: a hang, as it was

STEPS_AROUND_A_STOP = """
    import os, time, torch
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step():
        opt.zero_grad(); model(torch.randn(8, 4)).sum().backward(); opt.step()

    for _ in range(40):
        step(); time.sleep(0.02)
    print("pid", os.getpid(), flush=True)
    # until a gap between two clock reads shows the stop and continue: each read is compared
    # with the one before it, so a stop between any two of them is seen
    last = time.monotonic()
    while True:
        step(); time.sleep(0.02)
        now = time.monotonic()
        if now - last >= 3:
            break
        last = now
    for _ in range(20):
        step(); time.sleep(0.02)
    print("last line", flush=True)
"""


def test_a_job_stopped_by_a_signal_passes_the_job_gate(tmp_path: Path) -> None:
    """Was: a job SIGSTOPped for 30 s and continued was judged hung (`ci` exit 3)."""
    script = write_script(tmp_path, "stopped.py", STEPS_AROUND_A_STOP)
    run_dir, json_path = tmp_path / "run", tmp_path / "ci.json"
    cmd = trainprof_cmd(
        "ci", "--quiet", "--hang-after", "2", "--steps", "1000000", "--run-dir", str(run_dir),
        "--json", str(json_path), str(script),
    )  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().decode()
        assert first.startswith("pid "), first
        pid = int(first.split()[1])
        os.kill(pid, signal.SIGSTOP)
        time.sleep(STOPPED_FOR_S)  # the stop is what is tested: it lasts this long
        os.kill(pid, signal.SIGCONT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr = err.decode()
    assert proc.returncode == 0, stderr[-3000:]
    assert out.decode().splitlines()[-1:] == ["last line"], (out, stderr[-3000:])
    said = [ln for ln in stderr.splitlines() if "stopped by a signal" in ln and "│" not in ln]
    assert any(
        re.search(r"│\s+stopped\s+the job was stopped by a signal for", ln)
        for ln in stderr.splitlines()
    )
    assert len(said) == 1 and "not a hang" in said[0], stderr[-3000:]
    assert "no progress" not in stderr
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta.get("hang") is None and meta["stopped_by"] is None
    (span,) = meta["suspended"]["spans"]
    assert STOPPED_FOR_S - 1 <= span["for_s"] <= STOPPED_FOR_S + 1
    report = json.loads(json_path.read_text())
    assert report["run"]["stopped_by"] is None
    assert report["run"]["suspended"] == meta["suspended"]  # the report says it, not a stall
    # the stop is no stall; the job's own sleep in every step is a wait, said as one
    stalls = [f for f in report["findings"] if f["id"] in ("cpu-stall", "blocking-stall")]
    assert all(f["title"].startswith("The training loop waits every step") for f in stalls), stalls
    assert [g["status"] for g in report["ci"]["gates"] if g["name"] == "job"] == ["pass"]
