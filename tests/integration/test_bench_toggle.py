"""The bench's in-loop toggle under the probe: it finds the hot-path parts (the collate timer
among the fetch part's), switches each on alone and as empty wrappers, and reports every cost
as a paired median with its half-width."""

from __future__ import annotations

import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT))

from bench import overhead  # noqa: E402

pytestmark = pytest.mark.parallel  # judges no timing or load (CONTRIBUTING)


def test_the_toggle_measures_each_part_alone_and_empty() -> None:
    cmd = [sys.executable, str(overhead.LOOP), "--toggle", "--by-part", "--sizes", "16x8"]
    out = overhead.run_in_probe([*cmd, "--measure-s", "0.3", "--warmup-s", "0.1"], timeout=120)
    assert "error" not in out, out
    found = out["parts_found"]
    assert found["steps"] and found["loader"] and found["fetch"], found
    (row,) = out["toggle"]
    want = {"same", "all", "steps", "loader", "fetch", "steps empty", "loader empty", "fetch empty"}
    for key in ("cost_us_paired", "cost_us_cpu"):
        assert want <= set(row[key]), row[key]
        assert all(len(v) == 2 and v[1] >= 0 for v in row[key].values()), row[key]
    assert row["cycles"] >= 3 and row["steps_per_mode"] >= 3 * row["block_steps"]
