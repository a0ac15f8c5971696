"""The writer's step lines carry each µs value truncated as ``int`` truncates it, in the event
format's field order, whatever the value's sign or size."""

from __future__ import annotations

import random

from trainprof.probe.writer import _step_lines
from trainprof.store.schema import STEP


def test_step_lines_truncate_as_int_does() -> None:
    rng = random.Random(7)
    t0 = 12345.678
    records = []
    for _ in range(500):
        t = t0 + rng.uniform(-0.001, 90000.0)
        prev = t - rng.choice([rng.uniform(0, 2e-6), rng.uniform(0, 5.0), -rng.uniform(0, 1e-6)])
        records.append((t, prev, rng.uniform(0, 0.3), rng.uniform(0, 1e-3), 64, 1, 64))
    expected = "".join(
        f"{STEP} {int((t - t0) * 1e6)} {int((t - p) * 1e6)} {int(w * 1e6)} {int(s * 1e6)} "
        f"{bs} {f} {n}\n"
        for t, p, w, s, bs, f, n in records
    )
    assert _step_lines(records, t0) == expected
    assert _step_lines([], t0) == ""
