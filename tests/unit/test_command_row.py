"""The report's command row breaks only between the command's words: a quoted path with a space
is never split, so each line pastes back as the same words."""

from __future__ import annotations

import shlex

from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from trainprof.render.text import ShellLine

COMMAND = ["python", "/home/a user/my projects/trainprof/examples/demo_train.py", "--epochs", "3"]


def _rendered(width: int) -> list[str]:
    t = Table.grid(padding=(0, 2))
    t.add_column(justify="right", no_wrap=True)
    t.add_column(overflow="fold")
    t.add_row("command", ShellLine(COMMAND))
    console = Console(width=width, color_system=None, force_terminal=False)
    with console.capture() as cap:
        console.print(Panel(t))
    return [ln.strip("│ ").removeprefix("command").strip() for ln in cap.get().splitlines()[1:-1]]


def test_a_narrow_box_breaks_between_words_with_a_continuation() -> None:
    lines = _rendered(80)
    assert lines == ["python \\", f"{shlex.quote(COMMAND[1])} \\", "--epochs 3"]
    pasted = " ".join(ln.removesuffix(" \\") for ln in lines)
    assert shlex.split(pasted) == COMMAND  # the lines read back as the command's words


def test_a_wide_box_keeps_it_on_one_line() -> None:
    assert _rendered(120) == [shlex.join(COMMAND)]


def test_a_word_wider_than_the_box_folds_by_characters_not_at_its_space() -> None:
    lines = ShellLine(COMMAND).lines(30)
    assert all(len(ln) <= 30 for ln in lines), lines
    assert f"{shlex.quote(COMMAND[1])} \\" in "".join(lines)
