"""Findings while the job runs, for real: a job that turns slow half-way (it starts to block
for 0.25 s every 10 steps) is judged while it runs; live.json says the finding appeared after the first
judgement, with its time; `trainprof report` of the running job gives the report so far without
storing it; the final report carries the change and says it in one line."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from conftest import trainprof_cmd, write_script

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]  # alone: its phases are judged

JOB = """
    import json, os, time, torch
    live = os.path.join(os.environ["TRAINPROF_RUN_DIR"], "live.json")
    model = torch.nn.Linear(64, 64)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def judged_ids():
        try:
            data = json.load(open(live))
        except (OSError, ValueError):
            return None
        return {f["id"] for f in data["findings"]} if data["judged"] else None

    steps = 0

    def step(slow):
        global steps
        loss = model(torch.randn(64, 64)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        steps += 1
        if slow and steps % 10 == 0:
            time.sleep(0.25)  # the slow phase: a blocking wait every 10 steps

    start = time.monotonic()
    while (healthy := judged_ids()) is None and time.monotonic() - start < 120:
        step(False)  # the healthy phase, until it is judged
    open(os.environ["PHASE_FILE"], "w").close()
    while not os.path.exists(os.environ["PHASE_FILE"] + ".seen"):
        step(True)
    start = time.monotonic()
    while not ((judged_ids() or set()) - (healthy or set())) and time.monotonic() - start < 120:
        step(True)  # the slow phase, until a new finding is judged
    print("done", flush=True)
"""


def test_a_finding_that_appears_along_the_run_is_said_with_its_time(tmp_path: Path) -> None:
    script = write_script(tmp_path, "job.py", JOB)
    run_dir = tmp_path / "run"
    phase = tmp_path / "phase"
    # judged every 3 s; py-spy's chunks (which a judgement reads once finished) of 8 s
    env = {
        **os.environ,
        "TRAINPROF_LIVE_INTERVAL_S": "3",
        "TRAINPROF_STACK_CHUNK_S": "8",
        "PHASE_FILE": str(phase),
    }
    proc = subprocess.Popen(
        trainprof_cmd("run", "-q", "--run-dir", str(run_dir), str(script)),
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 180
        while not phase.exists():  # the healthy phase was judged; the job waits for us
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)  # a file another process makes: no event to wait on
        first_t = json.loads((run_dir / "live.json").read_text())["first_judged_s"]
        so_far = subprocess.run(
            trainprof_cmd("report", str(run_dir), "--json", "-"),
            capture_output=True,
            text=True,
            timeout=120,
        )
        (tmp_path / "phase.seen").touch()
        assert so_far.returncode == 0, so_far.stderr
        report = json.loads(so_far.stdout)
        assert report["run"]["so_far"] is True
        assert "still running: the report so far" in so_far.stderr
        assert not (run_dir / "report.json").exists()  # the report so far is not stored
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err[-3000:]
    live = json.loads((run_dir / "live.json").read_text())
    appeared = [c for c in live["changes"] if c["change"] == "appeared"]
    late = [c for c in appeared if c["t_s"] > first_t]
    assert live["first_judged_s"] == first_t
    assert late, live
    final = json.loads((run_dir / "report.json").read_text())
    assert final["run"]["so_far"] is False
    assert final["run"]["changes"] == live["changes"]
    said = " ".join(err.split())  # as words: the terminal's width breaks the line anywhere
    assert "along the run (judged while it ran): " in said
    assert f"{late[0]['id']} appeared at" in said
