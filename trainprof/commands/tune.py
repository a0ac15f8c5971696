"""`trainprof tune`: measure the job with other DataLoader and thread settings, then show what helps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from trainprof.commands.options import JOB, OUTPUT, NoColor, refuse_stray_option
from trainprof.commands.run import positive_seconds
from trainprof.errors import TrainprofError
from trainprof.store import rundir

DEFAULT_BUDGET_S = 180.0
DEFAULT_WINDOW_S = 3.0


def tune(
    ctx: typer.Context,
    command: Annotated[
        list[str],
        typer.Argument(
            metavar="COMMAND...",
            help="train.py and its arguments, or -- and any command.",
            show_default=False,
        ),
    ],
    budget: Annotated[
        float,
        typer.Option(
            callback=positive_seconds,
            metavar="SECONDS",
            help=f"Time for all runs together (default {DEFAULT_BUDGET_S:.0f}).",
            rich_help_panel=JOB,
        ),
    ] = DEFAULT_BUDGET_S,
    window: Annotated[
        float,
        typer.Option(
            callback=positive_seconds,
            metavar="SECONDS",
            help=f"Training time per run after its first step (default {DEFAULT_WINDOW_S:.0f}).",
            rich_help_panel=JOB,
        ),
    ] = DEFAULT_WINDOW_S,
    candidate: Annotated[
        list[str] | None,
        typer.Option(
            metavar="SETTINGS",
            help="Try only these settings, e.g. num_workers=2,threads=1 (repeat).",
            rich_help_panel=JOB,
        ),
    ] = None,
    json_path: Annotated[
        Path | None,
        typer.Option(
            "--json",
            metavar="PATH",
            help="Also write the results as JSON (`-`: stdout).",
            rich_help_panel=OUTPUT,
        ),
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No progress bar.", rich_help_panel=OUTPUT)
    ] = False,
    no_color: NoColor = False,
) -> None:
    """Run the job briefly with other DataLoader workers and torch threads, alternated with its
    own settings, and show which measured faster.

    Each run stops after the same number of steps. Only settings that do not change what is
    trained are tried: the training DataLoader's num_workers and persistent_workers, and
    torch's intra-op threads. The job's output is kept out of the way.

    Example:

      trainprof tune --budget 120 train.py --epochs 1
    """
    from trainprof.collect.launcher import resolve_command
    from trainprof.doctor.cpu import usable_cpu_count
    from trainprof.render.text import make_console
    from trainprof.tune.candidates import parse_candidate
    from trainprof.tune.render import render, to_json
    from trainprof.tune.search import tune as run_search

    refuse_stray_option(ctx, command)
    if json_path is not None:
        rundir.check_user_file(json_path, "--json")
    if window * 2 > budget:
        raise TrainprofError(
            f"--budget {budget:g} leaves no room for two runs of --window {window:g}"
        )
    only = [parse_candidate(text) for text in candidate] if candidate else None
    resolved = resolve_command(list(command))
    cpus = usable_cpu_count()  # the job's: it inherits this process's affinity and quota
    console = make_console(stderr=True)
    if quiet:
        search = run_search(resolved, cpus, budget, window, lambda _what, _done: None, only=only)
    else:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(
            TextColumn("tune"),
            BarColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.description}"),
            console=console,
            transient=True,
        ) as bar:
            task = bar.add_task("starting", total=1.0)

            def progress(what: str, done: float) -> None:
                bar.update(task, description=what, completed=done)

            search = run_search(resolved, cpus, budget, window, progress, only=only)
    render(make_console(), search)
    result = to_json(search)
    from trainprof.tune.saved import save

    cwd = rundir.current_dir()
    if cwd is not None:
        save(result, Path(cwd))  # a later report of this command quotes it by its fixes
    if json_path is not None:
        text = json.dumps(result, indent=1) + "\n"
        _write(json_path, text)


def _write(path: Path, text: str) -> None:
    try:
        rundir.write_user_file(path, text)
    except OSError as exc:
        raise TrainprofError(f"could not write --json {path}: {exc.strerror}") from None
