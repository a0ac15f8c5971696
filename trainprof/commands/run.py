"""`trainprof run`: launch a training job with the probe inside, then report."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Annotated, Any

import typer

from trainprof.collect.runner import RunOptions
from trainprof.collect.runner import run as run_job
from trainprof.commands.options import (
    HANG_AFTER_HELP,
    JOB,
    SAMPLING,
    HtmlOut,
    JsonOut,
    MetricsPort,
    MlflowOut,
    NoColor,
    Quiet,
    RunDir,
    TensorboardOut,
    TraceOut,
    Verbose,
    WandbOut,
    option_names,
    refuse_stray_option,
)
from trainprof.errors import TrainprofError
from trainprof.store.rundir import check_user_file
from trainprof.store.session import Session

OnReport = Callable[[Session, dict[str, Any]], None]
MIN_INTERVAL_S = 0.05  # below it the sampler itself costs a CPU core
MAX_INTERVAL_S = 3600.0


def positive_seconds(value: float | None) -> float | None:
    """A duration option: more than 0 and finite (typer's min= is inclusive)."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise typer.BadParameter(f"{value:g} is not a positive number of seconds")
    return value


def chain(first: OnReport | None, then: OnReport) -> OnReport:
    """One ``on_report`` that runs ``first`` (where there is one), then ``then``."""
    if first is None:
        return then

    def both(session: Session, report: dict[str, Any]) -> None:
        first(session, report)
        then(session, report)

    return both


def run(
    ctx: typer.Context,
    command: Annotated[
        list[str],
        typer.Argument(
            metavar="COMMAND...",
            help="train.py and its arguments, or -- and any command.",
            show_default=False,
        ),
    ],
    steps: Annotated[
        int | None,
        typer.Option(
            min=1,
            metavar="N",
            help="Stop after N optimizer steps (or batches).",
            rich_help_panel=JOB,
        ),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            callback=positive_seconds,
            metavar="SECONDS",
            help="Stop the job after this long (exit 124).",
            rich_help_panel=JOB,
        ),
    ] = None,
    on_hang: Annotated[
        str | None,
        typer.Option(
            metavar="report|kill",
            help="On a hang: keep waiting or stop (default: kill with --timeout).",
            rich_help_panel=JOB,
        ),
    ] = None,
    hang_after: Annotated[
        float | None,
        typer.Option(
            callback=positive_seconds,
            metavar="SECONDS",
            help=HANG_AFTER_HELP,
            rich_help_panel=JOB,
        ),
    ] = None,
    interval: Annotated[
        float | None,
        typer.Option(
            min=MIN_INTERVAL_S,
            max=MAX_INTERVAL_S,
            metavar="SECONDS",
            help="Host and GPU sample period (default 0.5).",
            rich_help_panel=SAMPLING,
        ),
    ] = None,
    no_stacks: Annotated[
        bool,
        typer.Option(
            "--no-stacks",
            help="Do not sample Python stacks with py-spy.",
            rich_help_panel=SAMPLING,
        ),
    ] = False,
    stacks: Annotated[bool, typer.Option("--stacks", hidden=True)] = False,  # the default
    no_redact: Annotated[
        bool,
        typer.Option(
            "--no-redact",
            help="Store secret-looking arguments as given.",
            rich_help_panel=SAMPLING,
        ),
    ] = False,
    json_path: JsonOut = None,
    html_path: HtmlOut = None,
    trace_path: TraceOut = None,
    tensorboard: TensorboardOut = None,
    metrics_port: MetricsPort = None,
    mlflow: MlflowOut = False,
    wandb: WandbOut = False,
    run_dir: RunDir = None,
    quiet: Quiet = False,
    verbose: Verbose = False,
    no_color: NoColor = False,
) -> None:
    """Run a training job with trainprof's probe inside it, then print what slows it down.

    The job's output passes through unchanged; its exit code is trainprof's exit code (killed
    by signal N → 128+N). Ctrl-C reaches the job; you still get a partial report.

    Example:

      trainprof run train.py --epochs 3
    """
    refuse_stray_option(ctx, command)
    if json_path is not None:
        check_user_file(json_path)  # one line for a directory, or one on an unreadable path
    if on_hang not in (None, "report", "kill"):
        raise TrainprofError("--on-hang must be `report` or `kill`")
    on_report = None
    if tensorboard is not None:
        from trainprof.export import tensorboard as tb

        tb.check(tensorboard)  # before the job: never a run without what was asked of it
        on_report = tb.printing_export(tensorboard)
    for asked, exporter in ((mlflow, "mlflow_run"), (wandb, "wandb_run")):
        if asked:
            from importlib import import_module

            module = import_module(f"trainprof.export.{exporter}")
            module.check()  # before the job: the extra installed, or one line naming it
            on_report = chain(on_report, module.printing_export())
    metrics = None
    if metrics_port is not None:
        from trainprof.export.prometheus import MetricsServer

        metrics = MetricsServer(metrics_port)  # bound now: a port in use is said before the job
    code = run_job(
        RunOptions(
            command=list(command),
            run_dir=run_dir,
            json_path=json_path,
            steps=steps,
            timeout_s=timeout,
            interval_s=interval,
            quiet=quiet,
            verbose=verbose,
            stacks=not no_stacks,
            on_hang=on_hang,
            hang_after_s=hang_after,
            no_redact=no_redact,
            trace_path=trace_path,
            html_path=html_path,
            option_names=option_names(ctx),
            on_report=on_report,
            metrics=metrics,
        )
    )
    raise typer.Exit(code)
