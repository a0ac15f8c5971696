"""The GPU overhead check's training loop (``bench/gpu_loop.py``), tried on the CPU: under
``trainprof run`` every step goes through the probe's loader hot path (a batch of B samples a
step, the dataset fetched once a step), which is what the GPU toggle measures the cost of."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from conftest import ROOT, run_trainprof

from bench.gpu_loop import _interpolate
from trainprof.store.session import Session

pytestmark = pytest.mark.parallel  # judges no timing or load (CONTRIBUTING)


def test_loop_steps_through_the_loader_hot_path(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    loop = [sys.executable, "-m", "bench.gpu_loop", "--device", "cpu", "--sizes", "256x64x0"]
    r = run_trainprof(tmp_path, "--", *loop, "--warmup-s", "0.2", "--measure-s", "1", env=env)
    assert r.returncode == 0, r.stderr
    assert r.report is not None
    summary = r.report["summary"]
    assert summary["unit"] == "step"
    rate = json.loads(r.stdout.splitlines()[-1])["rates"][0]
    assert summary["steps"] >= rate["steps"]  # the warm-up's steps too
    assert abs(summary["samples_per_s"] / summary["steps_per_s"] - 64) < 1e-3  # B a step
    assert summary["data_wait_frac"] is not None  # the loader's __next__ timed
    primary = Session.load(r.run_dir).primary
    assert primary is not None
    assert set(primary.steps["fetches"][1:]) == {1}  # one loader batch a step...
    assert abs(primary.fetch_count - summary["steps"]) <= 2  # ...one dataset fetch each
    assert primary.collate_us > 0


def test_calibration_picks_the_nearer_depth_next_to_zero() -> None:
    points = [(0, 0.8e-3), (1, 1.2e-3), (2, 1.6e-3)]  # seconds a step
    assert _interpolate(points, 1e-3 * 0.9, 1) == 0
    assert _interpolate(points, 1e-3 * 1.1, 1) == 1
    assert _interpolate(points, 1e-3 * 0.5, 1) == 0  # even depth 0 is slower: as fast as it gets
    assert _interpolate(points, 1.4e-3, 1) in (1, 2)
