"""The report's first panel for an attach run: which process was sampled and for how long,
the estimated iteration rate (method and confidence), the main thread's shares, and the host
readings, each said to be not measured where it was not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from trainprof.analysis.metrics import Metrics
from trainprof.analysis.outside_view import SHARES, OutsideView, RateEstimate
from trainprof.analysis.stop import stop_signal_words
from trainprof.render.host_rows import add_host_rows
from trainprof.render.text import literal, shell_join
from trainprof.units import plural


def rate_text(r: RateEstimate) -> str:
    if r.steps_per_s is None:
        return f"not estimated: {r.reason}"
    return (
        # a backward pass each, which `run` would count per optimizer step: say so, or a job
        # accumulating gradients over 4 micro-batches reads 4x the rate `run` reports
        f"~{r.steps_per_s:.2f} it/s estimated (one backward pass each: a micro-batch "
        f"where gradients accumulate; period {r.period_s * 1e3:.1f} ms outside "
        f"stalls; {r.method}; confidence {r.confidence}: peak {r.score:.2f}, "
        f"{r.harmonics} multiple{'s' if r.harmonics != 1 else ''} agree)"
        if r.period_s is not None
        else f"~{r.steps_per_s:.2f} it/s"
    )


def shares_text(shares: dict[str, float]) -> str:
    parts = [f"{label} {shares[k]:.0%}" for k, label in SHARES if shares.get(k, 0.0) >= 0.005]
    return " · ".join(parts) or "—"


def outside_summary(meta: dict[str, Any], m: Metrics) -> Table:
    a = m.outside
    assert a is not None
    t = Table.grid(padding=(0, 2))
    t.add_column(style="dim", justify="right", no_wrap=True)
    t.add_column(overflow="fold")
    command = [str(x) for x in meta.get("command", [])]
    if command:
        command[0] = Path(command[0]).name
    t.add_row("attached to", literal(f"pid {a.pid}: {shell_join(command)}"))
    if a.note:
        t.add_row("", literal(a.note))
    wall = meta.get("wall_s")
    how = (
        f"interrupted ({stop_signal_words(meta)}) — partial report"
        if meta.get("stopped_by") == "interrupt"
        else f"the target {a.target_exit}"
        if a.target_exit
        else "the target is still running"
    )
    style = "yellow" if a.target_exit or meta.get("stopped_by") else "green"
    sampled = f"{a.sampled_s:.1f} s of stacks"
    if isinstance(wall, (int, float)):
        sampled += f" in {wall:.1f} s attached"
    t.add_row(
        "sampled",
        Text(
            f"{sampled} at {a.rate_hz} Hz, from outside (py-spy --nonblocking); {how}", style=style
        ),
    )
    if a.py_spy_restarts:
        t.add_row(
            "",
            Text(
                f"py-spy stopped by itself on the live job and was started again "
                f"({plural(a.py_spy_restarts, 'time')}): the stacks have gaps",
                style="yellow",
            ),
        )
    t.add_row("iterations", literal(rate_text(a.rate)))
    t.add_row("main thread", literal(shares_text(a.shares)))
    if a.stall_period_steps:
        sec = f" ({a.stall_period_s:.2f} s)" if a.stall_period_s else ""
        t.add_row("stalls", f"every ~{a.stall_period_steps} steps{sec}")
    t.add_row("workers", workers_text(a))
    for r in a.ranks:
        label = f"rank {r.rank}" if r.rank is not None else f"pid {r.pid}"
        t.add_row(label, literal(f"pid {r.pid}: {rate_text(r.rate)}; {shares_text(r.shares)}"))
    t.add_row(
        "step times",
        Text(
            "not measured: per-step times need `trainprof run` (no probe inside the job)",
            style="dim",
        ),
    )
    add_host_rows(t, m)
    return t


def workers_text(a: OutsideView) -> str:
    """``2 DataLoader worker processes seen``, or, where they were started again and again,
    ``47 DataLoader worker processes seen in 3.9 s, at most 2 at once: restarted``."""
    seen = f"{plural(a.workers, 'DataLoader worker process')} seen"
    if not a.workers_restarted:
        return seen
    return f"{seen} in {a.sampled_s:.1f} s, at most {a.workers_at_once} at once: restarted"
