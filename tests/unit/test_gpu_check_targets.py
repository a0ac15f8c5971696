"""The GPU check's reading of its toggle against the overhead targets (≤ 1 % at ≈ 100 steps/s,
≤ 3 % at ≈ 1000): the third H200 session's numbers, as the summary should put them."""

from __future__ import annotations

import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT))
try:
    from bench.gpu_check import against_targets
finally:
    sys.path.remove(str(ROOT))


def test_each_size_is_read_against_the_target_nearest_its_rate() -> None:
    rows = [
        {"size": "256x256x1", "steps_per_s": 611.0, "cost_us_paired": {"all": [32.7, 9.1]}},
        {"size": "10240x8192x1", "steps_per_s": 96.3, "cost_us_paired": {"all": [-0.1, 20.4]}},
        {"size": "no-pairs", "steps_per_s": 500.0, "cost_us": {"all": 3.0}},
    ]
    fast, slow = against_targets(rows)
    assert fast == (
        "- 256x256x1: all hooks +32.7 ± 9.1 µs a step = +2.00 ± 0.56 % at its 611 steps/s; "
        "at 1000 steps/s, +3.27 ± 0.91 % (target ≤ 3 % at ≈ 1000 steps/s)"
    )
    assert slow == (
        "- 10240x8192x1: all hooks -0.1 ± 20.4 µs a step = -0.00 ± 0.20 % at its 96 steps/s "
        "(target ≤ 1 % at ≈ 100 steps/s)"
    )
