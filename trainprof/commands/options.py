"""Command-line options several commands share, declared once so that their names, value names,
help and help panels read the same in every ``--help``."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Annotated

import typer

from trainprof.errors import TrainprofError

# The help panels options are grouped in (typer's rich_help_panel); --no-color and --help join
# OUTPUT in a command whose options have panels (cli.py).
JOB = "Job"
SAMPLING = "Sampling"
GATES = "Gates"
BASELINE = "Baseline"
OUTPUT = "Output"

Verbose = Annotated[
    bool,
    typer.Option(
        "--verbose", "-v", help="Also show info findings and skipped rules.", rich_help_panel=OUTPUT
    ),
]
Quiet = Annotated[
    bool, typer.Option("--quiet", "-q", help="No live status line.", rich_help_panel=OUTPUT)
]
RunDir = Annotated[
    Path | None,
    typer.Option(
        "--run-dir",
        metavar="DIR",
        help="Where to store the run (./trainprof-runs/...).",
        rich_help_panel=OUTPUT,
    ),
]
JsonOut = Annotated[
    Path | None,
    typer.Option(
        "--json",
        metavar="PATH",
        help="Also write the report as JSON (`-`: stdout).",
        rich_help_panel=OUTPUT,
    ),
]
TraceOut = Annotated[
    Path | None,
    typer.Option(
        "--trace",
        metavar="PATH",
        help="Also write a trace for Perfetto UI.",
        rich_help_panel=OUTPUT,
    ),
]
HtmlOut = Annotated[
    Path | None,
    typer.Option(
        "--html",
        metavar="PATH",
        help="Also write the report as HTML, with plots.",
        rich_help_panel=OUTPUT,
    ),
]
TensorboardOut = Annotated[
    Path | None,
    typer.Option(
        "--tensorboard",
        metavar="DIR",
        help="Also write the step series and findings as TensorBoard event files.",
        rich_help_panel=OUTPUT,
    ),
]
MetricsPort = Annotated[
    int | None,
    typer.Option(
        "--metrics-port",
        min=0,
        max=65535,
        metavar="PORT",
        help="Serve live numbers for Prometheus on this port while the job runs.",
        rich_help_panel=OUTPUT,
    ),
]
MlflowOut = Annotated[
    bool,
    typer.Option(
        "--mlflow",
        help="Also add the summary, findings and HTML report to the job's MLflow run (else a new one).",
        rich_help_panel=OUTPUT,
    ),
]
WandbOut = Annotated[
    bool,
    typer.Option(
        "--wandb",
        help="Also add the summary, findings and HTML report to the job's W&B run (else a new one).",
        rich_help_panel=OUTPUT,
    ),
]
HANG_AFTER_HELP = "Seconds without a step that are a hang."


def _no_color(value: bool) -> None:
    if value:
        from trainprof.render.text import force_no_color

        force_no_color()  # trainprof's own output; the job's environment is left as it is


NO_COLOR_HELP = "No colours or styles (the same as NO_COLOR=1)."
# Also after a command's name: `trainprof run --no-color train.py` is how people write it (it
# was "command not found: --no-color"); acted on as it is parsed, so no command reads it.
NoColor = Annotated[
    bool, typer.Option("--no-color", callback=_no_color, is_eager=True, help=NO_COLOR_HELP)
]


def option_names(ctx: typer.Context) -> frozenset[str]:
    """The option names of the command ``ctx`` runs (``--steps``, ``-q``, ...)."""
    params = ctx.command.params
    return frozenset(o for p in params for o in (*p.opts, *p.secondary_opts) if o.startswith("-"))


def refuse_stray_option(ctx: typer.Context, command: list[str]) -> None:
    """``run`` and ``ci`` pass everything from the job's command on through, so a mistyped
    option of their own would be taken for the command ("command not found: --stepz"): name
    it as an option, with the nearest real one, as typer does for the other commands."""
    if not command or not command[0].startswith("-"):
        return
    given = command[0].split("=", 1)[0]
    names = [o for p in ctx.command.params for o in getattr(p, "opts", ()) if o.startswith("--")]
    near = difflib.get_close_matches(given, names, n=1)
    hint = f"; did you mean {near[0]}?" if near else ""
    raise TrainprofError(f"no such option: {given} (--help lists them{hint})")
