"""`trainprof report`: re-render a stored run (console, and optionally JSON)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from trainprof.commands.options import (
    HtmlOut,
    JsonOut,
    MlflowOut,
    NoColor,
    TensorboardOut,
    TraceOut,
    Verbose,
    WandbOut,
)
from trainprof.errors import TrainprofError
from trainprof.store.rundir import (
    RUNS_DIR,
    check_readable,
    check_user_file,
    current_dir,
    latest_run_dir,
)


def report(
    run_dirs: Annotated[
        list[Path] | None,
        typer.Argument(
            help="A run directory (default: the latest in ./trainprof-runs/); several: the "
            "nodes of one multi-node job, merged.",
            show_default=False,
            metavar="RUN_DIR",
        ),
    ] = None,
    json_path: JsonOut = None,
    html_path: HtmlOut = None,
    trace_path: TraceOut = None,
    tensorboard: TensorboardOut = None,
    mlflow: MlflowOut = False,
    wandb: WandbOut = False,
    verbose: Verbose = False,
    no_color: NoColor = False,
) -> None:
    """Analyse a stored run again and print its report (on standard output).

    Example:

      trainprof report trainprof-runs/20261126-101500-train --html run.html
    """
    from trainprof.store.session import Session, is_run_dir

    nodes = list(run_dirs or [])
    run_dir = nodes[0] if nodes else None
    if run_dir is None:
        here = current_dir()
        if here is None:
            raise TrainprofError(
                "the current directory was deleted; give a run directory (trainprof report RUN_DIR)"
            )
        run_dir = latest_run_dir(Path(here) / RUNS_DIR)
        if run_dir is None:
            raise TrainprofError(
                f"no runs in ./{RUNS_DIR}; give a run directory (trainprof report RUN_DIR)"
            )
        shown = os.path.relpath(run_dir)
        typer.echo(f"trainprof report: the latest run, {shown}", err=True)
    for node in nodes or [run_dir]:
        check_readable(node, "run directory")
        if node.exists() and not node.is_dir():
            raise TrainprofError(
                f"{node} is a file, not a run directory: give the folder `trainprof run` wrote "
                f"(./{RUNS_DIR}/<time>-<script>); `trainprof compare` reads report files"
            )
        if not node.is_dir():
            raise TrainprofError(f"no such run directory: {node}")
        if not is_run_dir(node):
            raise TrainprofError(f"{node} is not a trainprof run directory (no run.json)")
    if json_path is not None:
        check_user_file(json_path)
    for option, path in (("--trace", trace_path), ("--html", html_path)):
        if path is not None:
            from trainprof.render.html import check_view_path

            check_view_path(path, option)
    if tensorboard is not None:
        from trainprof.export import tensorboard as tb

        tb.check(tensorboard)
    from importlib import import_module

    trackers = [
        import_module(f"trainprof.export.{name}")
        for asked, name in ((mlflow, "mlflow_run"), (wandb, "wandb_run"))
        if asked
    ]
    for tracker in trackers:
        tracker.check()
    from trainprof.render.text import clean, make_console
    from trainprof.report import report as render_report
    from trainprof.store.run_files import irregular

    for node in nodes or [run_dir]:
        if skipped := irregular(node):
            shown = ", ".join(skipped[:5]) + (
                f" and {len(skipped) - 5} more" if len(skipped) > 5 else ""
            )
            typer.echo(
                clean(f"trainprof: not read in {node}, not regular files: {shown}"), err=True
            )

    if len(nodes) > 1:  # one multi-node job: its nodes on one clock (store/merge.py)
        from trainprof.store.merge import merge_nodes

        session = merge_nodes(nodes)
    else:
        session = Session.load(run_dir)
        session.meta.setdefault("run_dir", str(run_dir))
    # No job output to keep clean here, so the report goes to stdout (`> report.txt` works);
    # to stderr only when stdout carries the JSON (--json -).
    to_stderr = json_path is not None and str(json_path) == "-"
    data = render_report(
        session,
        json_path,
        verbose=verbose,
        console=make_console(stderr=to_stderr),
        trace_path=trace_path,
        html_path=html_path,
    )
    if tensorboard is not None:
        typer.echo(tb.export(session, data, tensorboard), err=True)
    for tracker in trackers:
        typer.echo(tracker.export(session, data), err=True)
