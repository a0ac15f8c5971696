"""`trainprof demo`: run a bundled example job under trainprof and show its report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trainprof.errors import TrainprofError
from trainprof.runner import RunOptions
from trainprof.runner import run as run_job

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def demo(
    name: Annotated[
        str,
        typer.Argument(help="`train` (the default demo) or a zoo case name; `list` shows them."),
    ] = "train",
    run_dir: Annotated[Path | None, typer.Option(help="Where to store this run.")] = None,
) -> None:
    """Run an example training job that has known problems, and show what trainprof finds."""
    if name == "train":
        script = EXAMPLES / "demo_train.py"
        typer.echo(f"trainprof demo: running {script.name} under `trainprof run` ...", err=True)
        raise typer.Exit(run_job(RunOptions([str(script)], run_dir=run_dir, timeout_s=120)))
    from trainprof.examples.zoo import ZOO, script_path

    if name == "list":
        typer.echo("train  the default demo: fake batching over a slow dataset")
        for case in ZOO.values():
            typer.echo(f"{case.name}  {case.summary}")
        return
    if name not in ZOO:
        raise TrainprofError(f"no demo named {name!r}; `trainprof demo list` shows them")
    script = script_path(name)
    typer.echo(f"trainprof demo: running {script.name} under `trainprof run` ...", err=True)
    raise typer.Exit(
        run_job(RunOptions([str(script)], run_dir=run_dir, timeout_s=ZOO[name].timeout_s))
    )
