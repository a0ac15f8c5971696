"""`trainprof compare A B`: two runs side by side (thin: load, compare, render)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from trainprof.commands.options import NoColor
from trainprof.render.text import make_console
from trainprof.store.rundir import check_user_file, write_user_file

# The comparison loads the analysis: imported where used, so that every other command's start
# does not pay for it.
if TYPE_CHECKING:
    from trainprof.compare.diff import Side

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
    json_path: Annotated[
        Path | None,
        typer.Option(
            "--json",
            metavar="PATH",
            help="Also write the comparison as JSON to this path (`-`: to stdout, the table "
            "then goes to stderr).",
        ),
    ] = None,
    no_color: NoColor = False,
) -> None:
    """Compare two runs: samples/s and step time with their spread, the verdict (faster,
    slower or within noise), the findings that appeared or disappeared, and the settings that
    differ (batch size, workers, precision, device, torch version).

    samples/s, not it/s, decides: a step of a larger batch does more work, so raising the
    batch size lowers it/s while samples/s goes up. Two loops without a DataLoader (no batch
    size, no samples/s) are compared by it/s.

    Examples:

      trainprof compare trainprof-runs/20261126-101500-train trainprof-runs/20261126-103000-train

      trainprof compare baseline.json current.json

      trainprof compare baseline.json current.json --json - | jq .verdict
    """
    if json_path is not None:
        check_user_file(json_path)
    side_a = _side(a, "run A", windows)
    side_b = _side(b, "run B", windows)
    from trainprof.compare.diff import compare as compare_sides
    from trainprof.compare.render import render_comparison

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
