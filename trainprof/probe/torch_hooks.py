"""Installs the probe's hooks into torch once the user's code has imported it.

The hooks, one module per job, each with its ``install(torch, off)`` (``off``: the parts
switched off):

- ``steps.py``: the optimizer post-hook that counts and ends each step, ``--steps``, and
  ``backward()`` returns before any step;
- ``loader.py``: DataLoader batches (data wait, sampler, samples), epochs, configuration;
- ``fetch_timers.py``: dataset fetch, collate_fn and pin_memory time, in workers too, and
  what the main process's first batch holds (``batch_kind.py``);
- ``watches.py``: ``train()``/``eval()`` switches, and ``zero_grad``, ``autocast`` and the
  optimizers built over the first steps.

Beside them: ``first_step.py`` (what the first optimizer step reads), ``device_marks.py`` (the
CUDA device timeline it starts), ``counters.py`` (cumulative counters at flush points) and
``state.py`` (the state they share); ``torch.save`` is timed by ``saves.py``.

Everything on the hot path is a few clock reads and integer adds; the writer formats records
as it flushes. Any probe error disables that hook's bookkeeping, never the job's call.
"""

from __future__ import annotations

import time
from typing import Any

from trainprof.probe import fetch_timers, loader, records, saves, steps, watches
from trainprof.probe.counters import flush_counters
from trainprof.probe.state import state
from trainprof.store.schema import TORCH


def install(torch: Any) -> None:
    """The shared state from the probe's settings, then each part's hooks; none without a writer."""
    w = records.writer()
    if w is None:
        return
    off = records.disabled_parts()
    state.writer = w
    state.last_boundary = w.t0
    # --steps counts the steps the "steps" part sees (with it off, nothing is counted)
    state.max_steps = records.max_steps() if "steps" not in off else None
    state.steps_min_s = records.steps_min_s()
    state.device_off = "device" in off  # the pre-step hook comes with a CUDA timeline
    w.add(f"{TORCH} {w.us(time.monotonic())}\n")
    w.on_tick.append(flush_counters)
    steps.install(torch, off)
    loader.install(torch, off)
    fetch_timers.install(torch, off)
    if "save" not in off:
        torch.save = saves.timed(torch.save, "f")
    watches.install(torch, off)
