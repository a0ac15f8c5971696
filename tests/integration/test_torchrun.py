"""`trainprof run -- torchrun ...` on CPU (gloo): ranks are seen, rank 0's stacks are sampled
(not the launcher's), and a rank with a slow input pipeline is named as the straggler, with
data as its cause, and the input-bound finding said to hit that rank only."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from conftest import run_trainprof

from trainprof.examples.zoo import script_path


def test_torchrun_ranks_and_a_data_straggler(tmp_path: Path) -> None:
    torchrun = str(Path(sys.executable).parent / "torchrun")
    r = run_trainprof(
        tmp_path,
        "--",
        torchrun,
        "--nproc-per-node",
        "2",
        str(script_path("dist_data_straggler")),
        timeout=240,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.report is not None and r.report["summary"]["steps"] == 200
    assert r.problems[0] == "straggler-rank", r.report["findings"]
    straggler = r.report["findings"][0]
    assert straggler["title"].startswith("Rank 1 is the straggler")
    assert "data loading" in straggler["title"]
    assert any("it waits for data" in e for e in straggler["evidence"])
    # judged on rank 1's own steps: it is input-bound, rank 0 is not
    rank1 = next(f for f in r.report["findings"] if f["id"] == "input-bound")
    assert rank1["title"].startswith("Rank 1: ") and rank1["impact"] is None
    assert rank1["where"] and "dist_data_straggler.py:" in rank1["where"]
    per_rank = r.report["ranks"]["per_rank"]
    assert per_rank[1]["data_wait_per_step_s"] > 5 * per_rank[0]["data_wait_per_step_s"]
    meta = json.loads((r.run_dir / "run.json").read_text())
    headers = [
        json.loads(p.read_text().split("\n", 1)[0][5:]) for p in r.run_dir.glob("events-*.tp")
    ]
    rank0 = next(h["pid"] for h in headers if h.get("rank") == 0)
    assert meta["stacks"]["pid"] == rank0
