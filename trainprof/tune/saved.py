"""Where `trainprof tune` keeps what it measured, so a later report can quote it by its fix.

Each tune run writes ``./trainprof-runs/tune/<time>-<script>.json`` (its ``--json`` content);
``latest_for`` finds the newest one of the same command (the same arguments after the
interpreter) on the same number of usable CPUs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trainprof.store import rundir

FOLDER = "tune"


def save(result: dict[str, Any], cwd: Path) -> Path | None:
    """Keep a tune run's result under ``cwd``'s run folder; None where it cannot be written."""
    folder = cwd / rundir.RUNS_DIR / FOLDER
    name = rundir.default_run_dir(list(result.get("command") or ["job"]), folder).name
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{name}.json"
        rundir.write_json(path, result)
    except OSError:
        return None
    return path


def latest_for(command: list[str], usable_cpus: int | None, cwd: Path) -> dict[str, Any] | None:
    """The newest saved result of this command on this many CPUs, or None."""
    folder = cwd / rundir.RUNS_DIR / FOLDER
    try:
        paths = sorted(folder.glob("*.json"), reverse=True)
    except OSError:
        return None
    for path in paths[:50]:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or not isinstance(data.get("command"), list):
            continue
        if data["command"][1:] != command[1:]:
            continue
        if usable_cpus is not None and data.get("usable_cpus") not in (None, usable_cpus):
            continue
        return data
    return None
