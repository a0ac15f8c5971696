"""Every command's `--help`, as a terminal of 80 columns shows it: short, grouped, one style.

A help that scrolls off the screen is not read: at 80 columns `run --help` was 117 lines and
`ci --help` 133, with Python types showing through (`<list[str]>`), arguments named in five
styles and choices left unsaid.
"""

from __future__ import annotations

import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from trainprof.cli import app

# The most lines each help may take at 80 columns ("" is `trainprof --help`).
BUDGET = {
    "": 40,
    "run": 50,
    "ci": 50,
    "attach": 40,
    "report": 30,
    "compare": 35,
    "demo": 30,
    "doctor": 30,
    "rules": 35,
    "tune": 35,
}
COMMANDS = [c for c in BUDGET if c]
# What typer prints for a value's Python type (`<int>`, `<list[str]>`, `<float range>`) and a
# number's bounds (`[x>=1]`, `[2<=x<=20]`).
PYTHON_TYPE = re.compile(r"<(?:int|float|str|bool|path|text|list|tuple|dict|choice)\b[^>]*>")
RANGE = re.compile(r"\[[\d.]*<?=?x[<>]=?[\d.]*")
# The commands that run or read a job, whose shared options must read alike.
JOB_COMMANDS = ("run", "attach", "ci", "report", "demo")


@cache
def help_text(command: str, columns: int = 80) -> str:
    """`trainprof [command] --help` as a terminal of ``columns`` shows it (in this process:
    typer and rich read COLUMNS as they render)."""
    args = [command, "--help"] if command else ["--help"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": str(columns), "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("command", list(BUDGET))
def test_each_help_fits_its_line_budget_at_80_columns(command: str) -> None:
    text = help_text(command)
    lines = text.rstrip("\n").splitlines()
    assert len(lines) <= BUDGET[command], f"{len(lines)} lines:\n{text}"
    assert max(len(line) for line in lines) <= 80, text


@pytest.mark.parametrize("command", list(BUDGET))
def test_no_python_types_or_ranges_show_through(command: str) -> None:
    text = help_text(command)
    assert not PYTHON_TYPE.search(text), text
    assert not RANGE.search(text), text
    assert "[default:" not in text, text  # defaults are said in the help's own words


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_shows_one_example_of_itself(command: str) -> None:
    text = help_text(command)
    assert "Example:" in text, text
    examples = re.findall(rf"^\s{{2,}}trainprof {command}\b.*$", text, re.MULTILINE)
    assert len(examples) == 1, text


@pytest.mark.parametrize("command", COMMANDS)
def test_arguments_are_named_in_one_style(command: str) -> None:
    """NAME required, [NAME] optional, NAME... repeated: in capitals, as click writes them."""
    usage = next(line for line in help_text(command).splitlines() if "Usage:" in line)
    after = usage.split("[OPTIONS]", 1)[1].split()
    for arg in after:
        assert re.fullmatch(r"\[?[A-Z][A-Z_]*(?:\.\.\.)?\]?", arg), usage


def test_choices_are_listed() -> None:
    assert re.search(r"--on-hang\s+report\|kill", help_text("run")), help_text("run")
    assert re.search(r"--fail-on\s+error\|warning", help_text("ci")), help_text("ci")


def test_options_are_grouped_in_panels() -> None:
    for command, panels in (
        ("run", ("Job", "Sampling", "Output")),
        ("ci", ("Job", "Gates", "Baseline", "Output")),
        ("attach", ("Sampling", "Output")),
    ):
        text = help_text(command)
        for panel in panels:
            assert f"─ {panel} ─" in text, text
        assert "─ Options ─" not in text, text  # --help and --no-color joined Output


def _options(command: str) -> dict[str, tuple[str | None, str | None, str | None]]:
    """A command's options by their first long name: (help, value name, panel)."""
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    cmd = group.commands[command]
    ctx = cmd.make_context(command, [], resilient_parsing=True)
    found = {}
    for param in cmd.get_params(ctx):
        longs = [o for o in getattr(param, "opts", []) if o.startswith("--")]
        if longs and not getattr(param, "hidden", False):
            found[longs[0]] = (
                getattr(param, "help", None),
                param.metavar,
                getattr(param, "rich_help_panel", None),
            )
    return found


def test_run_attach_ci_and_report_share_option_names_and_words() -> None:
    """An option two commands share reads the same in both: name, value name, help, panel (the
    help of --steps and --timeout says each command's own default)."""
    seen: dict[str, tuple[str, tuple[str | None, str | None, str | None]]] = {}
    for command in JOB_COMMANDS:
        for name, shown in _options(command).items():
            if name in ("--steps", "--timeout"):
                shown = (None, *shown[1:])
            if name in seen:
                first, earlier = seen[name]
                assert shown == earlier, f"{name}: {command} {shown} vs {first} {earlier}"
            else:
                seen[name] = (command, shown)
    every = {"--json", "--verbose", "--no-color"}
    for command in ("run", "attach", "ci", "report"):
        assert every <= _options(command).keys(), command
    for command in ("run", "attach", "ci"):
        assert {"--run-dir", "--quiet"} <= _options(command).keys(), command
    for command in ("run", "ci", "report"):
        assert {"--html", "--trace"} <= _options(command).keys(), command


def test_the_renamed_stacks_switch_still_takes_its_old_spelling(tmp_path: Path) -> None:
    """`--no-stacks` is the switch the help shows; `--stacks`, its old other half, still parses
    (hidden) and keeps the default: stacks sampled."""
    script = tmp_path / "job.py"
    script.write_text("print('ran')\n")
    assert "--stacks" not in help_text("run").replace("--no-stacks", "")
    p = subprocess.run(
        [sys.executable, "-m", "trainprof", "run", "-q", "--stacks", "--run-dir", "r", "job.py"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert p.returncode == 0 and "ran" in p.stdout, p.stderr
