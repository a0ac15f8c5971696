"""`trainprof doctor`: judge this machine before a training job starts (thin: parse, run, render).

It only observes: no setting is changed. Exit 0 when nothing fails, 1 when a check fails
(``--strict``: or warns), 2 on bad input (via TrainprofError).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated

import typer

from trainprof.commands.options import NoColor
from trainprof.errors import TrainprofError
from trainprof.store.rundir import check_user_file, write_user_file


def _validate(
    json_path: Path | None,
    workers: int | None,
    batch_mb: float | None,
    ckpt_dir: Path | None,
    data: Path | None,
) -> None:
    """Bad input is the user's to fix: one line and exit 2, before any check runs."""
    if workers is not None and workers < 0:
        raise TrainprofError(f"--workers must be 0 or more, got {workers}")
    if batch_mb is not None and not (math.isfinite(batch_mb) and batch_mb > 0):
        raise TrainprofError(f"--batch-mb must be more than 0, got {batch_mb:g}")
    if data is not None and not data.exists():
        raise TrainprofError(f"--data {data}: no such file or directory")
    if ckpt_dir is not None and ckpt_dir.exists() and not ckpt_dir.is_dir():
        raise TrainprofError(f"--ckpt-dir {ckpt_dir}: exists and is not a directory")
    if json_path is not None and not to_stdout(json_path):
        if not json_path.absolute().parent.is_dir():
            raise TrainprofError(f"--json {json_path}: directory {json_path.parent} does not exist")
        check_user_file(json_path)


def to_stdout(json_path: Path | None) -> bool:
    return json_path is not None and str(json_path) == "-"


def doctor(
    json_path: Annotated[
        Path | None,
        typer.Option(
            "--json",
            metavar="PATH",
            help="Also write the verdict as JSON (`-`: stdout).",
        ),
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 1 on warnings too (for CI).")
    ] = False,
    workers: Annotated[
        int | None,
        typer.Option("--workers", metavar="N", help="The job's DataLoader num_workers."),
    ] = None,
    batch_mb: Annotated[
        float | None,
        typer.Option("--batch-mb", metavar="MIB", help="One batch's size in MiB (for /dev/shm)."),
    ] = None,
    ckpt_dir: Annotated[
        Path | None,
        typer.Option(
            "--ckpt-dir", metavar="DIR", help="Where checkpoints go (default: current dir)."
        ),
    ] = None,
    data: Annotated[
        Path | None,
        typer.Option("--data", metavar="DIR", help="Dataset directory: a short read-speed test."),
    ] = None,
    no_color: NoColor = False,
) -> None:
    """Check this machine before training: shm, limits, CPUs, memory, GPUs, disk.

    It only observes: no setting is changed. Exit 1 when a check fails; with --strict, when
    one warns too.

    Example:

      trainprof doctor --workers 8 --data /data/train
    """
    from trainprof.doctor.registry import DoctorOptions, run_doctor
    from trainprof.render.doctor_console import render_doctor
    from trainprof.render.text import make_console

    _validate(json_path, workers, batch_mb, ckpt_dir, data)
    report = run_doctor(DoctorOptions(workers, batch_mb, ckpt_dir, data))
    render_doctor(report, make_console(stderr=to_stdout(json_path)), strict)
    if json_path is not None:
        try:
            write_user_file(json_path, json.dumps(report.to_json(strict), indent=2) + "\n")
        except OSError as exc:
            raise TrainprofError(f"--json {json_path}: {exc.strerror}") from exc
    code = report.exit_code(strict)
    if code:
        raise typer.Exit(code)
