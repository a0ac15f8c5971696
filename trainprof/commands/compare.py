"""`trainprof compare A B`: two runs side by side (thin: load, compare, render)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from trainprof.commands.options import NoColor
from trainprof.store.rundir import check_readable, check_user_file, write_user_file

# The comparison loads the analysis: imported where used, so that every other command's start
# does not pay for it.
if TYPE_CHECKING:
    from trainprof.compare.diff import Side

DEFAULT_WINDOWS = 5


def compare(
    a: Annotated[
        Path,
        typer.Argument(
            metavar="RUN_A",
            help="The reference: a run directory or a report JSON.",
            show_default=False,
        ),
    ],
    b: Annotated[
        Path,
        typer.Argument(metavar="RUN_B", help="The run to compare with RUN_A.", show_default=False),
    ],
    windows: Annotated[
        int,
        typer.Option(
            min=2,
            max=20,
            metavar="K",
            help=f"Windows each run's steady steps are split into (2 to 20; default "
            f"{DEFAULT_WINDOWS}).",
        ),
    ] = DEFAULT_WINDOWS,
    json_path: Annotated[
        Path | None,
        typer.Option(
            "--json",
            metavar="PATH",
            help="Also write the comparison as JSON (`-`: stdout).",
        ),
    ] = None,
    no_color: NoColor = False,
) -> None:
    """Compare two runs: throughput with its spread, the verdict, and what changed.

    samples/s decides (faster, slower or within noise): a larger batch lowers it/s while
    samples/s goes up; loops without a DataLoader are compared by it/s. Then the findings
    that appeared or disappeared, and the settings that differ (batch size, workers,
    persistent_workers, torch threads, precision, device, torch version).

    Example:

      trainprof compare baseline.json trainprof-runs/20261126-103000-train
    """
    if json_path is not None:
        check_user_file(json_path)
    side_a = _side(a, "run A", windows)
    side_b = _side(b, "run B", windows)
    from trainprof.compare.diff import compare as compare_sides
    from trainprof.compare.render import render_comparison
    from trainprof.render.text import make_console

    result = compare_sides(side_a, side_b)
    to_stderr = json_path is not None and str(json_path) == "-"
    render_comparison(make_console(stderr=to_stderr), result)
    if json_path is not None:
        write_user_file(json_path, json.dumps(result.to_json(), indent=1) + "\n")


def _side(path: Path, what: str, k: int) -> Side:
    from trainprof.compare.diff import Side
    from trainprof.compare.load import load_report
    from trainprof.compare.windows import Window, step_windows
    from trainprof.store.session import Session

    check_readable(path, what)
    report, run_dir = load_report(path, what)
    found: list[Window] = []
    if run_dir is not None:
        warmup = (report.get("summary") or {}).get("warmup_steps_excluded") or 0
        try:
            found = step_windows(Session.load(run_dir), warmup, k)
        except Exception:  # an unreadable run directory: the report alone still compares
            found = []
    if not found:
        stored = (report.get("ci") or {}).get("windows") or []
        try:
            found = [Window.from_json(w) for w in stored]
        except (KeyError, TypeError, ValueError):
            found = []
    return Side(str(path), report, tuple(found))
