"""`trainprof report`: re-render a stored run (console, and optionally JSON)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trainprof.errors import TrainprofError
from trainprof.store.session import Session, is_run_dir


def report(
    run_dir: Annotated[Path, typer.Argument(help="A run directory under ./trainprof-runs/.")],
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Also write the report as JSON to this path.")
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Also show info findings and skipped rules.")
    ] = False,
) -> None:
    """Analyse a stored run again and print its report."""
    if not run_dir.is_dir():
        raise TrainprofError(f"no such run directory: {run_dir}")
    if not is_run_dir(run_dir):
        raise TrainprofError(f"{run_dir} is not a trainprof run directory (no run.json)")
    from trainprof.runner import report as render_report

    session = Session.load(run_dir)
    session.meta.setdefault("run_dir", str(run_dir))
    render_report(session, json_path, verbose=verbose)
