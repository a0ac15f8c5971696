"""Cumulative counters written at flush points: dataset fetch times, and which optimizers stepped.

``flush_counters`` runs at each of the writer's ticks, and as a DataLoader worker ends; it
writes only what moved since.
"""

from __future__ import annotations

import time

from trainprof.probe import records
from trainprof.probe.state import state
from trainprof.store.schema import FETCH

_clock = time.monotonic


def flush_counters() -> None:
    """Write the cumulative counters that moved (called at flush points): dataset fetches, and
    the optimizers that stepped (which one is counted, and how often each stepped)."""
    w = records.writer()
    if w is None:
        return
    _report_optimizers()
    if state.fetch_count == state.fetch_reported:
        return
    state.fetch_reported = state.fetch_count
    s = state
    w.add(
        f"{FETCH} {w.us(_clock())} {s.fetch_count} {int(s.fetch_time * 1e6)} "
        f"{int(s.collate_time * 1e6)} {int(s.pin_time * 1e6)}\n"
    )


def _report_optimizers() -> None:
    s = state
    total = sum(n for _label, n in s.optimizer_log)
    if len(s.optimizer_log) < 2 or total == s.optimizers_reported:
        return
    s.optimizers_reported = total
    counted = s.optimizers.get(s.primary_opt_id) if s.primary_opt_id is not None else None
    records.record_info(
        {
            "optimizers": {
                "counted": counted[1][0] if counted else None,
                "steps": {label: n for label, n in s.optimizer_log},
            }
        }
    )
