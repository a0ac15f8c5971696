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
