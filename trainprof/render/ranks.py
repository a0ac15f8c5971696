"""The per-rank view of a torchrun job: a compact console table and the report's ``ranks``.

The table stays a few rows at any world size: every rank up to ``ALL_ROWS`` ranks; beyond,
the slowest rank, the median rank and the fastest, and a line that says how many are not
shown (``--json`` has every rank)."""

from __future__ import annotations

import math
from typing import Any

from rich.table import Table
from rich.text import Text

from trainprof.analysis.ranks import (
    FIELDS,
    RankView,
    aggregate,
    median_rank,
    spread,
    unmeasured_reason,
)
from trainprof.units import fmt_bytes

ALL_ROWS = 8


def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v * 1e3:.1f} ms"


def _row(label: str, r: RankView, gpu: bool) -> list[str]:
    cells = [
        label,
        str(r.rank) if r.node is None else f"{r.rank} (node {r.node})",
        "—" if r.steps_per_s is None else f"{r.steps_per_s:.1f}",
        _ms(r.step_s),
        _ms(r.wait_per_step_s),
        _ms(r.collective_per_step_s),
        "—" if r.cpu_percent is None else f"{r.cpu_percent:.0f}%",
        fmt_bytes(r.peak_rss_bytes),
    ]
    if gpu:
        cells.append("—" if r.gpu_util is None else f"{r.gpu_util:.0f}%")
    return cells


def rank_rows(ranks: tuple[RankView, ...]) -> list[tuple[str, RankView]]:
    """(label, rank) rows: all of a small job; the slowest, median and fastest of a big one."""
    if len(ranks) <= ALL_ROWS:
        sp = spread(ranks)
        # "slowest" only where the others measurably wait for it (5 % of a step)
        slow = sp.slow if sp is not None and sp.lost_share >= 0.05 else None
        return [("raised" if r.exception else "slowest" if r is slow else "", r) for r in ranks]
    sp = spread(ranks)
    slow = sp.slow if sp is not None else max(ranks, key=lambda r: r.step_s)
    key = "busy_s" if slow.busy_s is not None else "wait_per_step_s"
    rest = [r for r in ranks if r is not slow]
    mid = median_rank(rest, key) or rest[0]
    fast = min(rest, key=lambda r: (getattr(r, key) or 0.0, r.rank))
    # "slowest" only where the others measurably wait for it; else it only works the most
    label = "slowest" if sp is not None and sp.lost_share >= 0.05 else "busiest"
    rows = [(label, slow), ("median", mid)]
    if fast is not mid:
        rows.append(("fastest", fast))
    failed = next((r for r in ranks if r.exception and all(r is not x for _l, x in rows)), None)
    if failed is not None:  # the first rank that raised (rank-failed names it and the rest)
        rows.append(("raised", failed))
    return rows


def rank_table(
    ranks: tuple[RankView, ...], nodes: list[dict[str, Any]] | None = None
) -> Table | None:
    """The console's per-rank box (and, for a merged report, how its nodes' clocks were
    aligned); None for a single-process job."""
    if len(ranks) < 2:
        return None
    gpu = any(r.gpu_util is not None for r in ranks)
    t = Table(box=None, show_header=True, header_style="bold", pad_edge=False)
    names = ["", "rank", "it/s", "step", "data wait", "collectives", "CPU", "RSS"]
    for name in names + (["GPU"] if gpu else []):
        t.add_column(name, justify="left" if name in ("", "rank") else "right")
    for label, r in rank_rows(ranks):
        t.add_row(*_row(label, r, gpu))
    shown = len(rank_rows(ranks))
    notes = []
    if shown < len(ranks):
        notes.append(f"{len(ranks)} ranks, {len(ranks) - shown} not shown (--json has every rank)")
    if all(r.collective_per_step_s is None for r in ranks):
        notes.append(f"time in collectives not measured: {unmeasured_reason(ranks)}")
    notes.append("per step, steady state; collectives: time waiting in them")
    for n in nodes or []:
        if n.get("aligned_by") != "base":
            notes.append(
                f"node {n.get('node')}: clock {_offset(n.get('offset_s'))} from the base "
                f"node's, aligned by {n.get('aligned_by')} (wall clocks: "
                f"{_offset(n.get('wall_offset_s'))})"
            )
    grid = Table.grid()
    grid.add_row(t)
    for note in notes:
        grid.add_row(Text(note, style="dim"))
    return grid


def _offset(seconds: object) -> str:
    v = float(seconds) if isinstance(seconds, (int, float)) else 0.0
    return f"{v * 1e3:+.1f} ms" if abs(v) < 1 else f"{v:+.3f} s"


def _num(v: float | None, digits: int = 6) -> float | None:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return round(float(v), digits)


def ranks_json(ranks: tuple[RankView, ...]) -> dict[str, Any] | None:
    """The report's ``ranks`` object (docs/REPORT.md); None for a single-process job."""
    if not ranks:
        return None
    sp = spread(ranks)
    agg = aggregate(ranks)
    measured = any(r.collective_per_step_s is not None for r in ranks)
    return {
        "count": len(ranks),
        "collectives_measured": measured,
        "collectives_unmeasured": None if measured else unmeasured_reason(ranks),
        "slowest": None
        if sp is None
        else {
            "rank": sp.slow.rank,
            "lost_per_step_s": _num(sp.lost_per_step_s),
            "lost_share": _num(sp.lost_share, 4),
            "by": sp.by,
        },
        "aggregate": {
            name: None
            if (a := agg[name]) is None
            else {
                "min": _num(a.lo),
                "median": _num(a.median),
                "max": _num(a.hi),
                "min_rank": a.lo_rank,
                "max_rank": a.hi_rank,
                "measured": a.measured,
                "unit": unit,
            }
            for name, unit in FIELDS
        },
        "per_rank": [_rank_json(r) for r in ranks],
    }


def _rank_json(r: RankView) -> dict[str, Any]:
    return {
        "rank": r.rank,
        "local_rank": r.local_rank,
        "node": r.node,
        "pid": r.pid,
        "steps": r.steps,
        "steady_steps": r.steady_steps,
        "steps_per_s": _num(r.steps_per_s, 4),
        "step_time_s": _num(r.step_s),
        "step_p50_s": _num(r.p50_s),
        "data_wait_per_step_s": _num(r.wait_per_step_s),
        "collective_per_step_s": _num(r.collective_per_step_s),
        "ddp_wait_per_step_s": _num(r.ddp_per_step_s),
        "busy_per_step_s": _num(r.busy_s),
        "samples_per_step": _num(r.samples_per_step, 2),
        "save_s": _num(r.save_s),
        "cpu_percent": _num(r.cpu_percent, 2),
        "peak_rss_bytes": r.peak_rss_bytes,
        "gpu_util": _num(r.gpu_util, 2),
        "stacks_sampled": r.sampled,
        "backend": r.backend,
        "exception": None
        if r.exception is None
        else {"type": r.exception[0], "message": r.exception[1]},
    }
