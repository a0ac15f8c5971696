"""`trainprof attach PID`: diagnose a training job that is already running, from outside."""

from __future__ import annotations

from typing import Annotated

import typer

from trainprof.collect.attach import DEFAULT_DURATION_S, DEFAULT_RATE_HZ
from trainprof.commands.options import SAMPLING, JsonOut, NoColor, Quiet, RunDir, Verbose


def attach(
    pid: Annotated[
        int,
        typer.Argument(
            help="The training process (a worker's: its parent; torchrun's: its ranks).",
            show_default=False,
        ),
    ],
    duration: Annotated[
        float,
        typer.Option(
            "--duration",
            "-d",
            metavar="SECONDS",
            help=f"How long to sample (default {DEFAULT_DURATION_S:g}; Ctrl-C stops early).",
            rich_help_panel=SAMPLING,
        ),
    ] = DEFAULT_DURATION_S,
    rate: Annotated[
        int,
        typer.Option(
            "--rate",
            metavar="HZ",
            help=f"Stack samples a second (default {DEFAULT_RATE_HZ}; sees up to rate/2.5 it/s).",
            rich_help_panel=SAMPLING,
        ),
    ] = DEFAULT_RATE_HZ,
    launcher: Annotated[
        bool,
        typer.Option(
            "--launcher",
            help="PID launched the job (a shell script, a container's init): sample the Python "
            "training processes under it (torchrun's and accelerate's are found without it).",
        ),
    ] = False,
    json_path: JsonOut = None,
    run_dir: RunDir = None,
    quiet: Quiet = False,
    verbose: Verbose = False,
    no_color: NoColor = False,
) -> None:
    """Diagnose a job that is already running, from outside, without restarting it.

    Samples its Python stacks (py-spy, never pausing it), CPU, memory and GPU, then reports as
    `trainprof run` does: time by activity, stalls, an estimated it/s, findings, or the line
    each process of a hung job waits at. Needs ptrace rights (`trainprof doctor` checks).

    Example:

      trainprof attach 12345 --duration 60
    """
    from trainprof.collect.attach.runner import AttachOptions
    from trainprof.collect.attach.runner import attach as run_attach

    code = run_attach(
        AttachOptions(
            pid=pid,
            duration_s=duration,
            rate_hz=rate,
            json_path=json_path,
            run_dir=run_dir,
            quiet=quiet,
            verbose=verbose,
            launcher=launcher,
        )
    )
    raise typer.Exit(code)
