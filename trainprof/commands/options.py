"""Command-line options several commands share, declared once so that their names and help
read the same in every ``--help``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

Verbose = Annotated[
    bool, typer.Option("--verbose", "-v", help="Also show info findings and skipped rules.")
]
Quiet = Annotated[
    bool, typer.Option("--quiet", "-q", help="No live status line while the job runs.")
]
JobRunDir = Annotated[
    Path | None,
    typer.Option(
        "--run-dir", help="Where to store this run (default ./trainprof-runs/<UTC time>-<script>)."
    ),
]


def _no_color(value: bool) -> None:
    if value:
        from trainprof.render.text import force_no_color

        force_no_color()  # trainprof's own output; the job's environment is left as it is


NO_COLOR_HELP = "No colours or styles in any output (the same as NO_COLOR=1)."
# Also after a command's name: `trainprof run --no-color train.py` is how people write it (it
# was "command not found: --no-color"); acted on as it is parsed, so no command reads it.
NoColor = Annotated[
    bool, typer.Option("--no-color", callback=_no_color, is_eager=True, help=NO_COLOR_HELP)
]
