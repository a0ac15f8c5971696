"""What judging a run while it runs costs, and what the in-process probe costs a step.

``python -m bench.live [--rounds N] [--steps N]`` prints two tables' rows:

- the live judge (``trainprof.collect.live_judge``) on a day-long synthetic run directory
  (``bench.longrun.generate``): its CPU seconds and peak memory per judgement, read from the
  child's rusage, and the share of one CPU that follows from the runner's rule (the next
  judgement waits max(15 s, 100 × that CPU time));
- a one-thread training loop run plain and inside ``trainprof.profile(stacks=False)`` (the
  probe alone, as ``trainprof run`` loads it), alternated in rounds: the steps/s ratio and the
  cost per step.

No assertion is made on any timing: this is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench import longrun
from trainprof.collect.live_judge import CPU_SHARE, MIN_INTERVAL_S

LOOP = """
import json, sys, time, torch
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(8, 512), torch.randn(8, 1)

def steps(n):
    for _ in range(n):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

def timed(n):
    steps(200)  # warm-up
    t = time.perf_counter()
    steps(n)
    return n / (time.perf_counter() - t)

n = int(sys.argv[1])
if sys.argv[2] == "inprocess":
    import trainprof
    with trainprof.profile(run_dir=sys.argv[3], stacks=False, print_report=False):
        rate = timed(n)
else:
    rate = timed(n)
print(json.dumps({"steps_per_s": rate}))
"""


def judge_cost(folder: Path, steps: int) -> dict[str, Any]:
    """One judgement of a day-long run: its CPU seconds, peak RSS, and the share that follows."""
    run_dir = folder / "day"
    longrun.generate(run_dir, steps=steps)
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainprof.collect.live_judge", str(run_dir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    interval = max(MIN_INTERVAL_S, cpu / CPU_SHARE)
    return {
        "steps": steps,
        "exit_code": proc.returncode,
        "cpu_s": round(cpu, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "interval_s": round(interval, 1),
        "share_of_a_cpu": round(cpu / interval, 4),
        "live_json": (run_dir / "live.json").is_file(),
    }


def inprocess_cost(folder: Path, rounds: int, steps: int) -> dict[str, Any]:
    """Plain against in-process probe, alternated: steps/s of each round and their ratio."""
    script = folder / "loop.py"
    script.write_text(LOOP)
    plain: list[float] = []
    probed: list[float] = []
    for r in range(rounds):
        for variant, out in (("plain", plain), ("inprocess", probed)):
            p = subprocess.run(
                [sys.executable, str(script), str(steps), variant, str(folder / f"run{r}")],
                capture_output=True,
                text=True,
                check=True,
            )
            out.append(json.loads(p.stdout.splitlines()[-1])["steps_per_s"])
    ratios = [b / a for a, b in zip(plain, probed, strict=True)]
    a, b = statistics.median(plain), statistics.median(probed)
    return {
        "rounds": rounds,
        "plain_steps_per_s": round(a, 1),
        "inprocess_steps_per_s": round(b, 1),
        "ratio_median": round(statistics.median(ratios), 3),
        "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
        "us_per_step": round((1 / b - 1 / a) * 1e6, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.live", description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help="alternated rounds of the loop")
    ap.add_argument("--steps", type=int, default=3000, help="timed steps of the loop per run")
    ap.add_argument("--day-steps", type=int, default=1_000_000, help="steps of the day-long run")
    args = ap.parse_args(argv)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        judge = judge_cost(Path(tmp), args.day_steps)
        print(f"live judge, a day-long run: {json.dumps(judge)} (load {load:.1f})")
        inproc = inprocess_cost(Path(tmp), args.rounds, args.steps)
        print(f"in-process probe, one-thread loop: {json.dumps(inproc)} (load {load:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())


def table(judge: dict[str, Any], inproc: dict[str, Any]) -> str:
    """The two measurements as lines of text for ``make bench``'s output."""
    return "\n".join(
        [
            f"live judge, a day of {judge['steps']:,} steps: {judge['cpu_s']} CPU-s, "
            f"{judge['peak_rss_mb']} MB; next after {judge['interval_s']} s: "
            f"{judge['share_of_a_cpu']:.1%} of a CPU",
            f"in-process probe, one-thread loop: {inproc['ratio_median']} of plain "
            f"({inproc['rounds']} rounds, {inproc['ratio_range'][0]}–{inproc['ratio_range'][1]}) "
            f"at {inproc['plain_steps_per_s']} steps/s: {inproc['us_per_step']} µs a step",
        ]
    )
