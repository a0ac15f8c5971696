"""The rows a ``make bench`` run measured, written into the tables of docs/BENCHMARKS.md.

Each table there follows a ``<!-- bench:NAME -->`` line and has five columns: measure, value,
date, machine, command. ``update`` replaces the rows whose measure this run produced (in place)
and appends those the table lacks; every other row (a GPU row, another command's) is kept.
"""

from __future__ import annotations

import datetime
import os
import platform
from typing import Any

MB = 2**20
COMMAND = "`make bench`"
DAY_STEPS, DAY_HOURS = 1_000_000, 24.0  # the long run's defaults: the page's "day"
Rows = dict[str, list[tuple[str, str]]]  # table name -> (measure, value), in order


def machine_label() -> str:
    """This machine in a few words: CPUs, OS, the 1-minute load before the write."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{cpus} CPUs, {platform.system()}, load {os.getloadavg()[0]:.1f}"


def rows(results: dict[str, Any]) -> Rows:
    """The rows of each table this run measured (a section that was skipped or failed has
    none)."""
    out: Rows = {"hooks": [], "process": [], "scale": [], "suite": []}
    tog = results.get("toggle") or {}
    hooks = tog.get("hooks") or {}
    if "all" in hooks and "same" in hooks:
        (us, half), (aa, aa_half) = hooks["all"], hooks["same"]
        totals = tog.get("toggle") or [{}]
        size, rate = totals[0].get("size", "?"), totals[0].get("steps_per_s")
        at = f"; {size} at ≈ {rate:.0f} steps/s" if isinstance(rate, (int, float)) else ""
        out["hooks"].append(
            (
                "all hot-path hooks, in the loop",
                f"{us:.1f} ± {half:.1f} µs a step (A/A {aa:+.1f} ± {aa_half:.1f}{at})",
            )
        )
    for key, measure in (
        ("steps", "the optimizer post-hook alone, in the loop"),
        ("loader", "the DataLoader hooks alone (`__next__`, `_next_index`, `__iter__`)"),
        ("fetch", "the fetch and collate timers alone"),
    ):
        if key in hooks:
            us, half = hooks[key]
            out["hooks"].append((measure, f"{us:.1f} ± {half:.1f} µs a step"))
    over = results.get("overhead") or {}
    summary = {row["key"]: row for row in over.get("summary") or ()}
    if "trainprof" in summary and "plain" in summary:
        for size, cell, plain in zip(
            over["sizes"], summary["trainprof"]["cells"], summary["plain"]["cells"], strict=True
        ):
            if cell["ratio"] is None or plain["steps_per_s"] is None:
                continue
            lo, hi = cell["ratio_min"], cell["ratio_max"]
            verdict = ": unresolved" if lo < 1 < hi else ""
            out["process"].append(
                (
                    f"one-thread loop, {size}, default",
                    f"{cell['ratio']:.3f} of plain at {plain['steps_per_s']:.0f} steps/s "
                    f"(rounds {lo:.2f}–{hi:.2f}){verdict}",
                )
            )
    work = (results.get("workers") or {}).get("summary") or {}
    for key, measure in (
        ("ratio", "DataLoader workers keeping the CPUs busy, wall clock"),
        ("cpu_ratio", "DataLoader workers keeping the CPUs busy, per CPU-second of the job"),
    ):
        if work.get(key) is not None:
            got, half = work[key + "s"], work[key + "_halfwidth"]
            spread = f" ± {half:.3f}" if half is not None else ""
            out["process"].append(
                (
                    measure,
                    f"{work[key]:.3f}{spread} of plain (rounds {min(got):.3f} … {max(got):.3f})",
                )
            )
    if work.get("cpu_s") is not None and work.get("machine_share") is not None:
        out["process"].append(
            (
                "trainprof's own CPU on that job",
                f"{work['cpu_s']:.2f} CPU-s over {work['span_s']:.1f} s: "
                f"{work['machine_share']:.2%} of the {work['usable_cpus']} CPUs (runner "
                f"{work['supervisor_cpu_s']:.2f} s, py-spy {work['helpers_cpu_s']:.2f} s)",
            )
        )
    scale = results.get("scale") or {}
    gen, ana, rss = scale.get("generate"), scale.get("analysis") or {}, scale.get("runner") or {}
    if not (gen and gen["steps"] == DAY_STEPS and gen.get("hours") == DAY_HOURS):
        gen, ana = None, {}  # the page's rows are of a day: a shorter run replaces none
    if gen:
        steps = gen["steps"]
        out["scale"] += [
            ("event file of the main process", f"{gen['events_bytes'] / steps:.1f} B a step"),
            (
                "the run directory without py-spy traces",
                f"{gen['total_bytes'] / steps:.1f} B a step (samples.jsonl "
                f"{gen['samples_bytes'] / MB:.1f} MB a day)",
            ),
        ]
    if "load_s" in ana:
        out["scale"] += [
            ("load the day (`Session.load`)", f"{ana['load_s']:.2f} s"),
            ("analyse the day (`analyze()`, every rule)", f"{ana['analyze_s']:.2f} s"),
            (
                "the analysis' peak memory, fresh interpreter",
                f"{ana['peak_rss_bytes'] / MB:.1f} MB",
            ),
        ]
    if rss.get("runner_rss_live_max"):
        slope = rss.get("runner_rss_slope_mb_per_min")
        trend = f", {slope:+.2f} MB/min" if isinstance(slope, (int, float)) else ""
        out["scale"].append(
            (
                "the runner's memory while a job runs",
                f"{rss['runner_rss_first'] / MB:.0f} → {rss['runner_rss_last_live'] / MB:.0f} "
                f"MB, max {rss['runner_rss_live_max'] / MB:.0f} MB{trend}",
            )
        )
    if results.get("complete"):
        out["suite"].append(
            ("the benchmarks above (CPU rows)", f"{results['bench_seconds']:.0f} s")
        )
    return out


def update(text: str, measured: Rows, machine: str, date: str | None = None) -> str:
    """text with each measured row in its table: replaced where the table has its measure,
    else added at the table's end. A table named in measured but missing from text is an
    error: the page and the bench disagree."""
    date = date or datetime.date.today().isoformat()
    lines = text.splitlines()
    for name, new_rows in measured.items():
        if not new_rows:
            continue
        marker = f"<!-- bench:{name} -->"
        if marker not in lines:
            raise ValueError(f"no table marked {marker}")
        start = lines.index(marker) + 3  # the marker, the header, the separator
        end = start
        while end < len(lines) and lines[end].startswith("|"):
            end += 1
        table = lines[start:end]
        keys = [_first_cell(row) for row in table]
        for measure, value in new_rows:
            row = f"| {measure} | {value} | {date} | {machine} | {COMMAND} |"
            if measure in keys:
                table[keys.index(measure)] = row
            else:
                table.append(row)
                keys.append(measure)
        lines[start:end] = table
    return "\n".join(lines) + "\n"


def _first_cell(row: str) -> str:
    return row.strip().strip("|").split(" | ", 1)[0].strip()
