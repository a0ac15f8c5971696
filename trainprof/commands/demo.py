"""`trainprof demo`: run a bundled example job under trainprof and show its report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from trainprof.commands.options import NoColor
from trainprof.errors import TrainprofError
from trainprof.runner import RunOptions
from trainprof.runner import run as run_job

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def demo(
    name: Annotated[
        str,
        typer.Argument(
            help="`train` (the default demo), a finding id (cpu-stall) or a zoo case name "
            "(cpu_stall); `list` shows them all.",
        ),
    ] = "train",
    run_dir: Annotated[Path | None, typer.Option(help="Where to store this run.")] = None,
    no_color: NoColor = False,
) -> None:
    """Run an example training job that has a known problem, and show what trainprof finds."""
    if name == "train":
        _run(EXAMPLES / "demo_train.py", run_dir, 120)
    from trainprof.examples.zoo import ZOO, script_path

    if name == "list":
        _list(ZOO)
        return
    case = ZOO.get(name) or ZOO.get(name.replace("-", "_"))
    if case is None:
        case = next((c for c in ZOO.values() if c.expect == name), None)
    if case is None:
        raise TrainprofError(f"no demo named {name!r}; `trainprof demo list` shows them")
    _run(script_path(case.name), run_dir, case.timeout_s)


def _list(zoo: dict[str, Any]) -> None:
    rows = [
        (
            "train",
            "(fake-batching, input-bound)",
            "the default demo: fake batching over a slow dataset",
        )
    ]
    rows += [(c.name, f"({c.expect or 'healthy control'})", c.summary) for c in zoo.values()]
    width = max(len(r[0]) for r in rows)
    for name, expect, summary in rows:
        typer.echo(f"{name:<{width}}  {expect} {summary}")


def _run(script: Path, run_dir: Path | None, timeout_s: float) -> None:
    typer.echo(f"trainprof demo: running {script.name} under `trainprof run` ...", err=True)
    raise typer.Exit(run_job(RunOptions([str(script)], run_dir=run_dir, timeout_s=timeout_s)))
