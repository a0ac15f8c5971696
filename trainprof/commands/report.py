"""`trainprof report`: re-render a stored run (console, and optionally JSON)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from trainprof.errors import TrainprofError
from trainprof.store.rundir import RUNS_DIR, check_user_file, latest_run_dir
from trainprof.store.session import Session, is_run_dir


def report(
    run_dir: Annotated[
        Path | None,
        typer.Argument(
            help="A run directory (default: the latest run in ./trainprof-runs/).",
            show_default=False,
        ),
    ] = None,
    json_path: Annotated[
        Path | None,
        typer.Option("--json", help="Also write the report as JSON to this path (`-`: to stdout)."),
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Also show info findings and skipped rules.")
    ] = False,
) -> None:
    """Analyse a stored run again and print its report (on standard output)."""
    if run_dir is None:
        run_dir = latest_run_dir(Path.cwd() / RUNS_DIR)
        if run_dir is None:
            raise TrainprofError(
                f"no runs in ./{RUNS_DIR}; give a run directory (trainprof report RUN_DIR)"
            )
        shown = os.path.relpath(run_dir)
        typer.echo(f"trainprof report: the latest run, {shown}", err=True)
    if not run_dir.is_dir():
        raise TrainprofError(f"no such run directory: {run_dir}")
    if not is_run_dir(run_dir):
        raise TrainprofError(f"{run_dir} is not a trainprof run directory (no run.json)")
    if json_path is not None:
        check_user_file(json_path)
    from trainprof.render.text import make_console
    from trainprof.runner import report as render_report

    session = Session.load(run_dir)
    session.meta.setdefault("run_dir", str(run_dir))
    # No job output to keep clean here, so the report goes to stdout (`> report.txt` works);
    # to stderr only when stdout carries the JSON (--json -).
    to_stderr = json_path is not None and str(json_path) == "-"
    render_report(session, json_path, verbose=verbose, console=make_console(stderr=to_stderr))
