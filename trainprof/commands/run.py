"""`trainprof run`: launch a training job with the probe inside, then report."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from trainprof.commands.options import JobRunDir, NoColor, Quiet, Verbose, refuse_stray_option
from trainprof.errors import TrainprofError
from trainprof.runner import RunOptions
from trainprof.runner import run as run_job

MIN_INTERVAL_S = 0.05  # below it the sampler itself costs a CPU core
MAX_INTERVAL_S = 3600.0


def positive_seconds(value: float | None) -> float | None:
    """A duration option: more than 0 and finite (typer's min= is inclusive)."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise typer.BadParameter(f"{value:g} is not a positive number of seconds")
    return value


def run(
    ctx: typer.Context,
    command: Annotated[
        list[str],
        typer.Argument(
            help="The script and its arguments (train.py --epochs 3), or `-- <any command>` "
            "(python -m pkg.train, torchrun ..., a shell wrapper).",
            show_default=False,
        ),
    ],
    json_path: Annotated[
        Path | None,
        typer.Option(
            "--json",
            help="Also write the report as JSON to this path (created 0600). `-`: to stdout, "
            "which the job's own output shares: the report comes last, once the job has ended.",
        ),
    ] = None,
    trace_path: Annotated[
        Path | None,
        typer.Option(
            "--trace",
            help="Also write a Chrome Trace Event Format file of the run (steps, data wait, "
            "stalls, saves, evals, Python stacks, CPU/memory/GPU counters) that Perfetto UI "
            "and chrome://tracing open.",
        ),
    ] = None,
    html_path: Annotated[
        Path | None,
        typer.Option(
            "--html",
            help="Also write the report as one self-contained HTML file with plots (no "
            "network needed: attach it to an issue or an email).",
        ),
    ] = None,
    steps: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Stop the job cleanly after N steps (profile the first N): optimizer steps; in "
            "a job without a torch optimizer, DataLoader batches, or else backward() calls.",
        ),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            callback=positive_seconds, help="Stop the job after this many seconds (exit code 124)."
        ),
    ] = None,
    run_dir: JobRunDir = None,
    interval: Annotated[
        float | None,
        typer.Option(
            min=MIN_INTERVAL_S,
            max=MAX_INTERVAL_S,
            help="Seconds between host/GPU samples (default 0.5 s, 2 s after ten minutes).",
        ),
    ] = None,
    quiet: Quiet = False,
    stacks: Annotated[
        bool,
        typer.Option(
            help="Sample the main thread's Python stack with py-spy (names the line behind a stall)."
        ),
    ] = True,
    on_hang: Annotated[
        str | None,
        typer.Option(
            help="When no step comes for a long time: `report` (save stacks, keep waiting) or "
            "`kill` (save stacks, stop the job). Default: kill with --timeout, else report.",
        ),
    ] = None,
    hang_after: Annotated[
        float | None,
        typer.Option(
            callback=positive_seconds,
            help="Seconds without a step that count as a hang (default: max(10, 20 median steps)); "
            "a silence whose stacks move or that reads or writes is work, not a hang.",
        ),
    ] = None,
    no_redact: Annotated[
        bool,
        typer.Option(
            "--no-redact",
            help="Store and print the command as given. By default the values of arguments "
            "named like a secret (*key*, *token*, *secret*, *password*, *auth*, ...) are "
            "stored and shown as ***; the job always gets its real arguments.",
        ),
    ] = False,
    verbose: Verbose = False,
    no_color: NoColor = False,
) -> None:
    """Run a training job with trainprof's probe inside it, then print what slows it down.

    The job's output passes through unchanged; its exit code is trainprof's exit code
    (killed by signal N → 128+N). Ctrl-C reaches the job; you still get a partial report.

    Examples:

      trainprof run train.py --epochs 3

      trainprof run --steps 200 --json report.json train.py

      trainprof run -- torchrun --nproc-per-node 2 train.py
    """
    refuse_stray_option(ctx, command)
    if json_path is not None and json_path.is_dir():
        raise TrainprofError(f"--json {json_path} is a directory; give a file path")
    if on_hang not in (None, "report", "kill"):
        raise TrainprofError("--on-hang must be `report` or `kill`")
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
            stacks=stacks,
            on_hang=on_hang,
            hang_after_s=hang_after,
            no_redact=no_redact,
            trace_path=trace_path,
            html_path=html_path,
        )
    )
    raise typer.Exit(code)
