"""`trainprof run`: launch a training job with the probe inside, then report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trainprof.errors import TrainprofError
from trainprof.runner import RunOptions
from trainprof.runner import run as run_job


def run(
    command: Annotated[
        list[str],
        typer.Argument(
            help="The script and its arguments (train.py --epochs 3), or `-- <any command>` "
            "(python -m pkg.train, torchrun ..., a shell wrapper).",
            show_default=False,
        ),
    ],
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Also write the report as JSON to this path.")
    ] = None,
    steps: Annotated[
        int | None,
        typer.Option(help="Stop the job cleanly after N optimizer steps (profile the first N)."),
    ] = None,
    timeout: Annotated[
        float | None, typer.Option(help="Stop the job after this many seconds (exit code 124).")
    ] = None,
    run_dir: Annotated[
        Path | None,
        typer.Option(
            help="Where to store this run (default ./trainprof-runs/<UTC time>-<script>)."
        ),
    ] = None,
    interval: Annotated[
        float | None,
        typer.Option(
            help="Seconds between host/GPU samples (default 0.5 s, 2 s after ten minutes)."
        ),
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No live status line while the job runs.")
    ] = False,
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
            help="Seconds without a step that count as a hang (default: max(10, 20 median steps))."
        ),
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Also show info findings and skipped rules.")
    ] = False,
) -> None:
    """Run a training job with trainprof's probe inside it, then print what slows it down.

    The job's output passes through unchanged; its exit code is trainprof's exit code
    (killed by signal N → 128+N). Ctrl-C reaches the job; you still get a partial report.

    Examples:

      trainprof run train.py --epochs 3

      trainprof run --steps 200 --json report.json train.py

      trainprof run -- torchrun --nproc-per-node 2 train.py
    """
    if steps is not None and steps <= 0:
        raise TrainprofError("--steps must be a positive number of optimizer steps")
    if timeout is not None and timeout <= 0:
        raise TrainprofError("--timeout must be a positive number of seconds")
    if json_path is not None and json_path.is_dir():
        raise TrainprofError(f"--json {json_path} is a directory; give a file path")
    if on_hang not in (None, "report", "kill"):
        raise TrainprofError("--on-hang must be `report` or `kill`")
    if interval is not None and interval < 0.05:
        raise TrainprofError("--interval must be at least 0.05 s")
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
        )
    )
    raise typer.Exit(code)
