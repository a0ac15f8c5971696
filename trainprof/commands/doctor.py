"""Placeholder: `trainprof doctor` is being written (issue 5)."""

from __future__ import annotations

import typer


def doctor() -> None:
    """Check this machine and environment before a training job starts."""
    typer.echo("doctor: not yet available")
    raise typer.Exit(1)
