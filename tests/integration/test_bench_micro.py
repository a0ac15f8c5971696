"""`make bench`'s per-call costs of the probe's hooks: every hook the benchmark names is really
called and measured, inside a process running the probe (a hook whose signature changed was
dropped from the table without a word once: now it is said, and this test fails)."""

from __future__ import annotations

import sys

import pytest
from conftest import ROOT

pytestmark = pytest.mark.parallel  # judges no timing or load (CONTRIBUTING)


def test_every_probe_hook_of_the_benchmark_is_measured() -> None:
    sys.path.insert(0, str(ROOT))
    try:
        from bench.overhead import micro
    finally:
        sys.path.remove(str(ROOT))
    m = micro()
    assert "error" not in m, m
    assert m["missing"] == [], m["missing"]
    names = {row["name"] for row in m["hooks"]}
    assert "autograd.backward mark (CUDA jobs; a CPU job's leaves)" in names
