"""The typer app: registers the commands and maps TrainprofError to one line and an exit code."""

from __future__ import annotations

import sys
from typing import Annotated

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


app.command("run", context_settings=PASSTHROUGH)(run.run)
app.command("report")(report.report)
app.command("demo")(demo.demo)
app.command("doctor")(doctor.doctor)
app.command("attach")(attach.attach)
app.command("ci", context_settings=PASSTHROUGH)(ci.ci)
app.command("compare")(compare.compare)
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
