"""What `trainprof tune` measured of the rules' fixes on the zoo's scripts: the rule pages' rows.

Copied by ``python -m tools.docs --pages`` from docs/BENCHMARKS.md's table "What `trainprof tune`
measured", where each row is written by hand after a run; edit that table, then run it again.
"""

from __future__ import annotations

MEASURED: tuple[str, ...] = tuple(
    [
        "| `oversubscribed.py`, 8 threads → `threads=2` (the report's fix) | 68.8 → 80.3 it/s, +17 % (±12 %), faster | not run that time | 2026-12-05 | cpu-vm, quiet |",
        "| `oversubscribed.py`, 8 threads → `threads=1` | 68.8 → 45.8 it/s, -33 % (±3 %), slower | not run that time | 2026-12-05 | cpu-vm, quiet |",
        "| `oversubscribed.py`, 8 threads → `threads=1` | 35.6 → 42.9 it/s, +21 % (±4 %), faster | not run that time | 2026-12-05 | cpu-vm, load 3 |",
        "| `oversubscribed.py`, 8 threads → `threads=1` | +11 %, within noise | +7 % (32.2 → 34.3 it/s) | 2026-12-05 | cpu-vm, others kept 2.0 CPUs busy |",
        "| `input_bound.py`, 0 workers → `num_workers=2, persistent_workers=True` (the report's fix) | 720.0 → 1028.6 samples/s, +43 % (±11 %), faster; a second run +44 % (±4 %) | not run that time | 2026-12-05 | cpu-vm, quiet |",
        "| `workers_oversubscribed.py`, 4 workers and 2 threads → `num_workers=1, threads=1` (the report's first fix) | 495.2 → 517.2 samples/s, +4 % (±24 %), within noise | not run that time | 2026-12-05 | cpu-vm, quiet |",
        "| `workers_oversubscribed.py`, 4 workers and 2 threads → `num_workers=0` (its second) | 495.2 → 650.8 samples/s, +31 % (±19 %), faster; the input alone ×4.24 the job's rate | not run that time | 2026-12-05 | cpu-vm, quiet |",
        "| `input_bound.py`, 0 workers → `num_workers=2, persistent_workers=True` | -9 %, within noise | +1 % (548.0 → 553.3 samples/s) | 2026-12-05 | cpu-vm, others kept 2.0 CPUs busy |",
        "| `input_bound.py`, all candidates, `--budget 420` | 18 runs in 338 s: workers 1 and 2 within noise (-7 %, -3 %), threads=2 stopped at 3× (slower); the step alone ×13.3, the input alone ×1.03 | — | 2026-12-04 | cpu-vm, load 12 |",
    ]
)
