"""The typer app: registers the commands and maps TrainprofError to one line and an exit code."""

from __future__ import annotations

import gc
import inspect
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer
import typer.core

from trainprof.commands import attach, ci, compare, demo, doctor, report, rules, run, tune
from trainprof.commands.options import OUTPUT, NoColor
from trainprof.errors import TrainprofError


class _Argument(typer.core.TyperArgument):
    """An argument as the help shows it: ``NAME``, ``[NAME]`` or ``NAME...`` in the usage, and
    no Python type beside it (typer 0.29 prints ``<list[str]>``)."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None

    def _usage_display_name(self) -> str:
        name = self.display_name_raw
        if self.nargs != 1 and not name.endswith("..."):
            name += "..."
        return name if self.required else f"[{name}]"

    def _get_number_range_help_str(self) -> str | None:
        return None


class _Option(typer.core.TyperOption):
    """An option as the help shows it: its value's name (PATH, N), no range or default column
    (each help text says its default and bounds, in words)."""

    def _get_number_range_help_str(self) -> str | None:
        return None


def _as_shown(params: list[Any]) -> list[Any]:
    """The help's one style for every command: arguments named in capitals, no Python types
    (``<int>``, ``<list[str]>``; an on/off flag takes no value at all), defaults in the help
    text, and in a command whose options are grouped, --no-color and --help under Output."""
    grouped = any(getattr(p, "rich_help_panel", None) for p in params)
    for param in params:
        if isinstance(param, typer.core.TyperArgument):
            param.__class__ = _Argument
            if param.metavar is None and param.name:
                param.metavar = param.name.upper()
        elif isinstance(param, typer.core.TyperOption):
            param.__class__ = _Option
            if grouped and getattr(param, "rich_help_panel", None) is None:
                param.rich_help_panel = OUTPUT
        elif grouped:  # the help option, a plain click Option
            param.rich_help_panel = OUTPUT
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
        param.show_default = False
    return params


class _Command(typer.core.TyperCommand):
    def get_params(self, ctx: Any) -> list[Any]:  # the help option is added here, lazily
        return _as_shown(super().get_params(ctx))


class _Group(typer.core.TyperGroup):
    def get_params(self, ctx: Any) -> list[Any]:
        return _as_shown(super().get_params(ctx))


app = typer.Typer(
    name="trainprof",
    cls=_Group,
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
    no_color: NoColor = False,
) -> None:
    """trainprof's global options (the help text is the app's; ``--no-color`` acts as it is
    parsed)."""


def _reflowed(doc: str | None) -> str:
    """A docstring as typer's rich markup should get it: each prose paragraph on one line, so
    the terminal wraps it (rich keeps single line breaks, and the help would break wherever the
    source wraps); indented paragraphs (examples) kept line by line.

    The first paragraph ends in three line breaks: typer dedents the rest as a docstring, whose
    first line does not count, and an "Example:" heading right after the summary would be that
    line, its indented example then dedented to the margin; a blank first line keeps it."""
    first, *rest = [
        p if any(line.startswith(" ") for line in p.splitlines()) else " ".join(p.split())
        for p in inspect.cleandoc(doc or "").split("\n\n")
    ]
    return "\n\n\n".join([first, "\n\n".join(rest)]) if rest else first


def _register(
    name: str, func: Callable[..., Any], short_help: str | None = None, **settings: Any
) -> None:
    """A command, its help reflowed; `trainprof --help` lists it by ``short_help``, else by its
    help's first paragraph."""
    help_text = _reflowed(func.__doc__)
    summary = short_help or help_text.split("\n\n")[0]
    app.command(name, cls=_Command, help=help_text, short_help=summary, **settings)(func)


_register("run", run.run, context_settings=PASSTHROUGH)
_register("report", report.report)
_register("demo", demo.demo)
_register("doctor", doctor.doctor)
_register("attach", attach.attach)
_register("ci", ci.ci, context_settings=PASSTHROUGH)
_register("compare", compare.compare)
_register("tune", tune.tune, context_settings=PASSTHROUGH)
_register("rules", rules.rules, "List the rules a report can fire, or show one in full.")


def main() -> None:
    """Console-script entry point; the process ends without a last garbage collection."""
    try:
        app()
    except TrainprofError as exc:
        from trainprof.render.text import clean

        print(f"trainprof: {clean(str(exc))}", file=sys.stderr)  # one line, whatever it quotes
        sys.exit(exc.exit_code)
    except PermissionError as exc:  # a path the user gave, on a way trainprof may not search
        from trainprof.render.text import clean

        where = f": {exc.filename}" if exc.filename else ""
        print(f"trainprof: {clean(f'{exc.strerror or exc}{where}')}", file=sys.stderr)
        sys.exit(2)
    finally:
        # The exit's last collection walked every object left (~0.05 s after a run's report)
        # to free memory the system takes back anyway; files are closed where they are written.
        gc.freeze()
