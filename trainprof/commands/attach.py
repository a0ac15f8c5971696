"""`trainprof attach PID`: diagnose a training job that is already running, from outside."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trainprof.attach import DEFAULT_DURATION_S, DEFAULT_RATE_HZ
from trainprof.commands.options import NoColor, Verbose


def attach(
    pid: Annotated[
        int,
        typer.Argument(
            help="The training process (a DataLoader worker's PID means its parent; a "
            "launcher's, such as bash or torchrun, the Python training processes under it).",
            show_default=False,
        ),
    ],
    duration: Annotated[
        float, typer.Option("--duration", "-d", help="Seconds to sample (Ctrl-C stops early).")
    ] = DEFAULT_DURATION_S,
    json_path: Annotated[
        Path | None,
        typer.Option("--json", help="Also write the report as JSON to this path (`-`: stdout)."),
    ] = None,
    rate: Annotated[
        int,
        typer.Option(
            "--rate",
            help="Stack samples per second. The iteration rate is estimated up to about "
            "rate/2.5 it/s.",
        ),
    ] = DEFAULT_RATE_HZ,
    run_dir: Annotated[
        Path | None,
        typer.Option(
            "--run-dir",
            help="Where to store the samples (default: ./trainprof-runs/<time>-attach-<script>).",
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No status line.")] = False,
    verbose: Verbose = False,
    no_color: NoColor = False,
) -> None:
    """Diagnose a job that is already running, without restarting it.

    Samples it from outside: py-spy stacks (--nonblocking: never paused),
    CPU, memory and GPU. Then the same report as `trainprof run`, from what
    the stacks show: time by activity, stalls and their period, an
    estimated it/s, and findings. A job that is hung (every process's stack
    held, nothing read or written, for 5 s or more) is said so first, with
    the line each process waits at. Rules that need the probe of `trainprof
    run` are listed as skipped (-v). Needs ptrace rights over the job
    (`trainprof doctor` checks them).
    """
    from trainprof.attach.runner import AttachOptions
    from trainprof.attach.runner import attach as run_attach

    code = run_attach(
        AttachOptions(
            pid=pid,
            duration_s=duration,
            rate_hz=rate,
            json_path=json_path,
            run_dir=run_dir,
            quiet=quiet,
            verbose=verbose,
        )
    )
    raise typer.Exit(code)
