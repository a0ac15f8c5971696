"""Every report states what trainprof's own processes cost the job, measured in that run: a real
job with DataLoader workers under `trainprof run`, watched from outside by this test."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import psutil
import pytest
from conftest import trainprof_cmd, write_script

pytestmark = pytest.mark.slow

WORKERS_JOB = """
    import time, torch
    from torch.utils.data import DataLoader, Dataset

    torch.set_num_threads(1)

    class Noise(Dataset):
        def __len__(self):
            return 1 << 16

        def __getitem__(self, i):
            return torch.randn(3, 32, 32).mul(2).tanh(), i % 10

    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Noise(), batch_size=16, num_workers=2, persistent_workers=True)
    t0 = time.monotonic()
    for x, y in loader:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        if time.monotonic() - t0 > 5:
            break
"""


def _cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def test_the_report_states_trainprofs_own_cpu_as_this_test_saw_it(tmp_path: Path) -> None:
    """The runner's and py-spy's CPU while the job ran, as the report states it, against the
    same processes' CPU read from outside at the job's start and end."""
    script = write_script(tmp_path, "workers.py", WORKERS_JOB)
    run_dir, json_path = tmp_path / "run", tmp_path / "r.json"
    cmd = trainprof_cmd("run", "--run-dir", str(run_dir), "--json", str(json_path), str(script))
    tp = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    runner = psutil.Process(tp.pid)
    job: psutil.Process | None = None
    at_start = None
    spies: dict[int, tuple[psutil.Process, float]] = {}  # py-spy: its latest CPU reading
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and tp.poll() is None:
            children = runner.children()
            if job is None:
                job = next((c for c in children if "workers.py" in " ".join(c.cmdline())), None)
                at_start = _cpu(runner) if job is not None else None
            elif not job.is_running() or job.status() == psutil.STATUS_ZOMBIE:
                break
            for child in children:
                if child.pid != getattr(job, "pid", None) and child.name() == "py-spy":
                    spies[child.pid] = (child, _cpu(child))
            time.sleep(0.05)
        at_end = _cpu(runner)
        out, err = tp.communicate(timeout=180)
    finally:
        if tp.poll() is None:
            tp.kill()
    assert tp.returncode == 0, err.decode()[-3000:]
    assert job is not None and at_start is not None
    cost = json.loads(json_path.read_text())["summary"]["trainprof_cost"]
    meta = json.loads((run_dir / "run.json").read_text())

    seen_runner = at_end - at_start
    seen_spy = sum(cpu for _, cpu in spies.values())
    assert spies, "py-spy was never seen running"
    # what the report says is what was used, within the sampler's last interval and this
    # test's 50 ms polling
    assert cost["supervisor_cpu_s"] == pytest.approx(seen_runner, rel=0.3, abs=0.15), cost
    assert cost["helpers_cpu_s"] == pytest.approx(seen_spy, rel=0.3, abs=0.15), cost
    assert 0 < cost["cpu_s"] < 0.5 * cost["span_s"], cost  # less than half a CPU
    assert meta["wall_s"] - 3 <= cost["span_s"] <= meta["wall_s"], (cost, meta["wall_s"])
    assert cost["usable_cpus"] == meta["usable_cpus"]
    share = cost["cpu_s"] / (cost["span_s"] * cost["usable_cpus"])
    assert cost["machine_share"] == pytest.approx(share, abs=1e-3)
    assert cost["probe_in_job"] is None and "not measured" in cost["not_measured"]["probe_in_job"]
    said = f"trainprof cost  {cost['cpu_s']:.2f} CPU-s over {cost['span_s']:.1f} s = "
    assert said in err.decode(), err.decode()[-3000:]
