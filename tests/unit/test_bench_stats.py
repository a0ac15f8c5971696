"""The benchmark's paired estimator: a drift of the machine shared by both sides of each pair
cancels, and the interval narrows with the number of pairs."""

from __future__ import annotations

import random
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT))
from bench.stats import paired_difference  # noqa: E402

sys.path.remove(str(ROOT))


def test_a_shared_drift_cancels_and_more_pairs_narrow_the_interval() -> None:
    rng = random.Random(1)
    drift = [i * 0.5 for i in range(400)]  # the machine slows down through the run
    on = [d + 10.0 + rng.gauss(0, 1) for d in drift]
    off = [d + rng.gauss(0, 1) for d in drift]
    cost, half = paired_difference(on, off)
    assert abs(cost - 10.0) < half < 0.5
    _, half_few = paired_difference(on[:25], off[:25])
    assert half_few > 2 * half
