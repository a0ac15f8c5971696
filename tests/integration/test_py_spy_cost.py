"""py-spy's own CPU is measured, and kept to a few percent of a CPU on a job of many threads."""

from __future__ import annotations

import itertools
import json
import subprocess
from pathlib import Path

import pytest
from conftest import trainprof_cmd, write_script

from trainprof.collect.samplers.stacks import DEFAULT_RATE_HZ, MIN_RATE_HZ, SPY_BUDGET

pytestmark = pytest.mark.slow

MANY_THREADS = """
    import threading, time, torch
    done = threading.Event()
    for _ in range(500):  # idle threads: py-spy reads each one at every sample
        threading.Thread(target=done.wait, daemon=True).start()
    model = torch.nn.Linear(64, 64)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 7:
        opt.zero_grad(); model(torch.randn(32, 64)).sum().backward(); opt.step()
"""


def test_py_spy_samples_less_often_on_a_job_of_500_threads(tmp_path: Path) -> None:
    """Was: py-spy used a whole CPU on a 500-thread job, which ran 3x slower, and the report
    blamed CPU starvation. 50 Hz on 500 idle threads costs ~20 % of a CPU here."""
    script = write_script(tmp_path, "threads.py", MANY_THREADS)
    run_dir = tmp_path / "run"
    cmd = trainprof_cmd(
        "run", "--run-dir", str(run_dir), "--json", str(tmp_path / "r.json"), str(script)
    )
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    chunks = json.loads((run_dir / "run.json").read_text())["stacks"]["chunks"]
    first = chunks[0]
    assert first["rate_hz"] == DEFAULT_RATE_HZ and first["spy_cpu"] > SPY_BUDGET, chunks
    for before, after in itertools.pairwise(chunks):  # each lowered to the rate within budget
        budget = before.get("spy_budget", SPY_BUDGET)  # lower on a busy machine once it trains
        wanted = max(MIN_RATE_HZ, int(before["rate_hz"] * budget / before["spy_cpu"]))
        assert after["rate_hz"] == wanted, chunks
    assert chunks[-1]["rate_hz"] < DEFAULT_RATE_HZ
    stacks = json.loads((run_dir / "run.json").read_text())["stacks"]
    assert [c["to_hz"] for c in stacks["rate_changes"]] == [c["rate_hz"] for c in chunks[1:]]
    # trainprof's bookkeeping stays out of the job's output: the report's cost row says it
    job_part, _, report = proc.stderr.partition("╭─ trainprof report")
    assert "trainprof:" not in job_part and "py-spy used" not in job_part, job_part[-3000:]
    assert "trainprof" not in proc.stdout and "py-spy" not in proc.stdout, proc.stdout[-3000:]
    flat = " ".join(ln.strip("│ ") for ln in report.splitlines())
    assert f"py-spy lowered its rate {DEFAULT_RATE_HZ} → " in flat, report
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["summary"]["trainprof_cpu_percent_mean"] is not None  # what trainprof cost
