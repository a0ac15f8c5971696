"""The typer app: registers the commands and maps TrainprofError to one line and an exit code."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer

from trainprof.commands import attach, ci, compare, demo, doctor, report, rules, run
from trainprof.errors import TrainprofError

app = typer.Typer(
    name="trainprof",
    help=(
        "Tells you why your PyTorch training is slow or broken, and what to change.\n\n"
        "Start with `trainprof run train.py \\[args]`, or `trainprof demo` to see a report."
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

PASSTHROUGH = {"allow_interspersed_args": False, "ignore_unknown_options": True}


def _version(value: bool) -> None:
    if value:
        from trainprof.version import __version__

        typer.echo(f"trainprof {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            callback=_version,
            is_eager=True,
            help="Print trainprof's version and exit.",
        ),
    ] = False,
    no_color: Annotated[
        bool,
        typer.Option(
            "--no-color",
            help="No colours or styles in any output (the same as NO_COLOR=1).",
        ),
    ] = False,
) -> None:
    """trainprof's global options (the help text is the app's)."""
    if no_color:
        from trainprof.render.text import force_no_color

        force_no_color()  # trainprof's own output; the job's environment is left as it is


def _register(name: str, func: Callable[..., Any], **settings: Any) -> None:
    """A command, listed in `trainprof --help` by its docstring's first paragraph on one line:
    in rich markup mode typer keeps that paragraph's line breaks, so the list would break
    mid-sentence wherever the source wraps."""
    first = inspect.cleandoc(func.__doc__ or "").split("\n\n")[0]
    app.command(name, short_help=" ".join(first.split()), **settings)(func)


_register("run", run.run, context_settings=PASSTHROUGH)
_register("report", report.report)
_register("demo", demo.demo)
_register("doctor", doctor.doctor)
_register("attach", attach.attach)
_register("ci", ci.ci, context_settings=PASSTHROUGH)
_register("compare", compare.compare)
app.command(
    "rules",
    short_help="List the rules a report can fire, or show one in full.",
)(rules.rules)


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except TrainprofError as exc:
        print(f"trainprof: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
