"""`trainprof tune` for real: on the zoo's input-bound job it finds a faster setting, whose
measured gain a plain A/B of the script edited by hand agrees with; on a healthy control it
finds nothing to gain within its budget.

Throughput on a shared machine: not ``parallel`` (a second job beside it is load it would
measure). Each test restricts the candidates (``--candidate``) so that its budget holds three
runs of each side: on a 2-CPU machine a run of the zoo's scripts costs 6-25 s, mostly the
job's start-up.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
from pathlib import Path
from typing import Any

import psutil
import pytest
from conftest import trainprof_cmd

from trainprof.examples.zoo import ZOO_DIR
from trainprof.tune.measure import run_trial
from trainprof.tune.search import FASTER

AGREE = 0.10  # of the original's samples/s
OTHERS_BUSY = 0.5  # CPUs other processes may keep busy before throughput is theirs to decide


def _others_busy_cpus() -> float:
    """CPUs the machine kept busy over one second while this test ran no job: other processes'."""
    return psutil.cpu_percent(interval=1.0) / 100 * (os.cpu_count() or 1)


def _tune(tmp: Path, script: Path, *args: str, budget: int) -> dict[str, Any]:
    out = tmp / "tune.json"
    r = subprocess.run(
        trainprof_cmd(
            "tune", "-q", "--budget", str(budget), "--json", str(out), *args, str(script)
        ),
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=budget + 120,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "changes results: not tried" in r.stdout, r.stdout
    result = json.loads(out.read_text())
    assert result["spent_s"] <= budget, result
    return result


def _judge(
    result: dict[str, Any], arm: dict[str, Any], before: float, after: float, others: float
) -> None:
    """Tune's change agrees with the A/B's within ``AGREE`` of the original's rate, and the
    candidate is the best, faster; xfailed where other processes took the CPUs meanwhile."""
    base = result["baseline"]["median"]
    tuned, ab = (arm["median"] - base) / base, (after - before) / before
    said = f"tune {tuned:+.0%} ({arm['verdict']}), A/B {ab:+.0%} ({before:.1f} → {after:.1f})"
    others = max(others, _others_busy_cpus())
    if others > OTHERS_BUSY and (abs(tuned - ab) > AGREE or arm["verdict"] != FASTER):
        # Other jobs' load decided, not the change: on 2 CPUs at load 7-12 the same script's
        # runs differed 2× from one another (132-266 samples/s), and the workers found no CPU.
        pytest.xfail(f"other processes kept {others:.1f} of {os.cpu_count()} CPUs busy: {said}")
    # what tune measured, whichever way: a plain A/B of the edited script sees the same change
    assert abs(tuned - ab) <= AGREE, said
    assert result["best"] == arm and arm["verdict"] == FASTER, said


def _fixed(script: Path, settings: dict[str, Any], tmp: Path) -> Path:
    """The script edited as the best line says: its DataLoader's workers, its thread count."""
    text = script.read_text()
    if "num_workers" in settings:
        loader = ", ".join(f"{k}={v}" for k, v in settings.items() if k != "threads")
        assert text.count("num_workers=0)") == 1
        text = text.replace("num_workers=0)", f"{loader})")
    if "threads" in settings:
        assert text.count("torch.set_num_threads(1)") == 1
        text = text.replace(
            "torch.set_num_threads(1)", f"torch.set_num_threads({settings['threads']})"
        )
    path = tmp / f"fixed_{script.name}"
    path.write_text(text)
    return path


def _ab(
    tmp: Path,
    original: Path,
    fixed: Path,
    steps: int,
    pairs: int = 3,
    fixed_env: dict[str, str] | None = None,
) -> tuple[float, float]:
    """Medians of alternated runs of the two scripts, as they are (no override), ``steps`` each;
    ``fixed_env``: the environment the fix is given in instead."""
    from trainprof.collect.launcher import resolve_command

    rates: list[list[float]] = [[], []]
    for i in range(pairs):
        for side, (script, env) in enumerate(((original, None), (fixed, fixed_env))):
            run_dir = tmp / f"ab-{i}-{side}"
            command = resolve_command([str(script)])
            trial = run_trial(command, {}, run_dir, steps, 3.0, 240, env)
            assert trial.rate is not None, trial.error
            rates[side].append(trial.rate)
    return statistics.median(rates[0]), statistics.median(rates[1])


@pytest.mark.timeout(900)  # ~90 s on an idle 2-CPU machine; five times that at load 10
def test_tune_finds_faster_workers_for_the_input_bound_job_and_an_ab_agrees(
    tmp_path: Path,
) -> None:
    script = ZOO_DIR / "input_bound.py"
    others_before = _others_busy_cpus()
    result = _tune(
        tmp_path,
        script,
        "--candidate",
        "num_workers=2,persistent_workers=True",
        budget=240,
    )
    (arm,) = result["candidates"]
    assert arm["problem"] is None and len(arm["rates"]) >= 3, arm
    fixed = _fixed(script, arm["settings"], tmp_path)
    before, after = _ab(tmp_path, script, fixed, result["steps_per_run"])
    _judge(result, arm, before, after, others_before)
    assert arm["code"] == ["DataLoader(..., num_workers=2, persistent_workers=True)"]


@pytest.mark.timeout(600)
def test_tune_finds_fewer_threads_for_the_oversubscribed_job_and_an_ab_agrees(
    tmp_path: Path,
) -> None:
    """A loop without a DataLoader whose torch threads are sized for 4× the CPUs: the report's
    fix, threads for the usable CPUs (on 2 CPUs, quiet: 8 threads 68.8 it/s, 2 threads 80.3,
    +17 %; 1 thread 45.8, -33 %)."""
    script = ZOO_DIR / "oversubscribed.py"
    usable = len(os.sched_getaffinity(0))
    others_before = _others_busy_cpus()
    result = _tune(tmp_path, script, "--candidate", f"threads={usable}", budget=240)
    (arm,) = result["candidates"]
    assert result["job_settings"]["num_workers"] is None and result["unit"] == "it/s", result
    assert arm["problem"] is None and len(arm["rates"]) >= 3, arm
    fixed_env = {**os.environ, "ZOO_THREADS": str(usable)}  # the script's own way to size them
    before, after = _ab(tmp_path, script, script, result["steps_per_run"], fixed_env=fixed_env)
    _judge(result, arm, before, after, others_before)
    assert arm["code"] == [f"torch.set_num_threads({usable})"]
    assert result["ceilings"] == {}  # both are a training loader's: none here


@pytest.mark.timeout(500)
def test_tune_finds_nothing_to_gain_on_a_healthy_control(tmp_path: Path) -> None:
    result = _tune(
        tmp_path,
        ZOO_DIR / "healthy_stream.py",
        "--candidate",
        "num_workers=1,persistent_workers=True",
        budget=240,
    )
    assert result["job_settings"] == {"num_workers": 2, "persistent_workers": True, "threads": 1}
    (arm,) = result["candidates"]
    assert arm["problem"] is None and len(arm["rates"]) >= 3, arm
    assert result["nothing_to_gain"] and arm["verdict"] != FASTER, arm
