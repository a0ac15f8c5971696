"""A real job whose DataLoader workers cost more than they save (the zoo's worker_pickle:
numpy batches pickled through the workers' pipe): trainprof measures the hand-over against a
worker's batch time and advises no workers, never more of them."""

from __future__ import annotations

from conftest import ZooRun


def test_workers_that_cost_more_than_they_save_are_not_advised(zoo_run: ZooRun) -> None:
    r = zoo_run("worker_pickle")  # the run test_zoo judges: one run a session
    assert r.returncode == 0, r.stderr[-3000:]
    found = {f["id"]: f for f in r.report["findings"]}
    assert "input-bound" in found, r.report["findings"]
    bound = found["input-bound"]
    assert any("pickles it into a pipe" in e for e in bound["evidence"]), bound["evidence"]
    assert bound["fix"][0].startswith("num_workers=0: a worker makes a batch in"), bound["fix"]
    assert any(f.startswith("return tensors from the dataset and collate_fn") for f in bound["fix"])
    adds = [f for f in bound["fix"] if "more workers" in f or "num_workers=1" in f]
    assert not adds, bound["fix"]
