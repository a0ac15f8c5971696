"""The MNIST example's shape under `trainprof run` (the zoo's healthy_epoch_eval): the test
pass once per epoch is a note, not a warning, and the report calls the job compute-bound."""

from __future__ import annotations

import re
import subprocess

from conftest import ZooRun, trainprof_cmd


def test_an_epoch_end_evaluation_is_a_note_and_the_job_compute_bound(zoo_run: ZooRun) -> None:
    r = zoo_run("healthy_epoch_eval")  # the run test_zoo judges: one run a session
    assert r.returncode == 0, r.stderr[-3000:]
    # ~7 % of the run on a quiet machine; under load a long evaluation can take more, and past
    # 10 % it is a warning again
    evals = [f for f in r.report["findings"] if f["id"] == "eval-stall"]
    for f in evals:
        assert (f["severity"] == "info") == (f["impact"] < 0.10), f
        if f["severity"] == "info":
            assert "at most once per epoch" in " ".join(f["evidence"]), f["evidence"]
    bottleneck = r.report["summary"]["bottleneck"]
    assert bottleneck and bottleneck["verdict"] == "compute-bound", bottleneck
    # the console report states it where it states the bottleneck
    shown = subprocess.run(
        trainprof_cmd("report", str(r.run_dir)), capture_output=True, text=True, timeout=120
    )
    assert re.search(r"bottleneck\s+compute-bound: the model's own forward", shown.stdout), (
        shown.stdout[-3000:]
    )
