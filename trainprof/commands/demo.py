"""`trainprof demo`: run a bundled example job under trainprof and show its report."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from trainprof.collect.runner import RunOptions
from trainprof.collect.runner import run as run_job
from trainprof.commands.options import NoColor, RunDir
from trainprof.errors import TrainprofError

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def demo(
    name: Annotated[
        str,
        typer.Argument(
            help="train (the default), a finding id (cpu-stall) or a zoo case (cpu_stall); "
            "list: all of them.",
        ),
    ] = "train",
    run_dir: RunDir = None,
    no_color: NoColor = False,
) -> None:
    """Run an example training job that has a known problem, and show what trainprof finds.

    Each example is a short CPU job of trainprof's zoo; `trainprof demo list` names them.

    Example:

      trainprof demo input-bound
    """
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
    # trainprof's own example: its own Python when that has torch (`make demo` activates
    # nothing), else the python on PATH as for any script
    own = [sys.executable] if importlib.util.find_spec("torch") is not None else []
    command = [*own, str(script)]
    raise typer.Exit(run_job(RunOptions(command, run_dir=run_dir, timeout_s=timeout_s)))
