"""`trainprof compare A B`: two runs side by side (thin: load, compare, render)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trainprof.compare.diff import Side
from trainprof.compare.diff import compare as compare_sides
from trainprof.compare.load import load_report
from trainprof.compare.render import render_comparison
from trainprof.compare.windows import Window, step_windows
from trainprof.render.text import make_console
from trainprof.store.session import Session

DEFAULT_WINDOWS = 5


def compare(
    a: Annotated[
        Path,
        typer.Argument(
            metavar="A",
            help="The reference: a run directory or a report JSON (`--json`, report.json).",
            show_default=False,
        ),
    ],
    b: Annotated[
        Path,
        typer.Argument(metavar="B", help="The run to compare with A.", show_default=False),
    ],
    windows: Annotated[
        int,
        typer.Option(
            min=2,
            max=20,
            help="Split each run's steady steps into K windows for the spread (needs its run "
            "directory; a `trainprof ci --json` report keeps its own windows).",
        ),
    ] = DEFAULT_WINDOWS,
) -> None:
    """Compare two runs: samples/s and step time with their spread, the verdict (faster,
    slower or within noise), the findings that appeared or disappeared, and the settings that
    differ (batch size, workers, precision, device, torch version).

    samples/s, not it/s, decides: a step of a larger batch does more work, so raising the
    batch size lowers it/s while samples/s goes up.

    Examples:

      trainprof compare trainprof-runs/20261126-101500-train trainprof-runs/20261126-103000-train

      trainprof compare baseline.json current.json
    """
    side_a = _side(a, "A", windows)
    side_b = _side(b, "B", windows)
    render_comparison(make_console(), compare_sides(side_a, side_b))


def _side(path: Path, what: str, k: int) -> Side:
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
