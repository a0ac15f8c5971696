"""Read a stored report for ``trainprof compare`` and ``trainprof ci --baseline``: a report JSON
file (``--json PATH``, a run directory's report.json) or a run directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trainprof.errors import TrainprofError
from trainprof.render.json_report import SCHEMA
from trainprof.render.text import clean
from trainprof.store import rundir
from trainprof.store.report_shape import shape_error
from trainprof.store.session import is_run_dir


def load_report(path: Path, what: str = "report") -> tuple[dict[str, Any], Path | None]:
    """The report, and the run directory it came from when that still exists (its steps give
    the throughput windows); one line and exit 2 for anything else."""
    if path.is_dir():
        if not is_run_dir(path):
            raise TrainprofError(
                f"{path} ({what}) is a directory but not a trainprof run directory"
            )
        file = path / rundir.REPORT
        if not file.is_file():
            raise TrainprofError(
                f"{path} ({what}) has no {rundir.REPORT} (the run never finished); "
                f"`trainprof report {path}` writes it"
            )
    elif path.is_file():
        file = path
    else:
        raise TrainprofError(f"{path} ({what}): no such file or run directory")
    try:
        data = rundir.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise TrainprofError(f"cannot read {file} ({what}): {exc}") from None
    except json.JSONDecodeError as exc:
        raise TrainprofError(
            f"{file} ({what}) is not JSON ({exc.msg}, line {exc.lineno})"
        ) from None
    except ValueError as exc:  # nested too deeply
        raise TrainprofError(f"{file} ({what}) is not a trainprof report: {exc}") from None
    schema = data.get("schema") if isinstance(data, dict) else None
    if isinstance(schema, str) and schema.startswith("trainprof.report/") and schema != SCHEMA:
        raise TrainprofError(
            f"{file} ({what}) is a {clean(schema)} report, from another trainprof version; "
            f"this one reads {SCHEMA}"
        )
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise TrainprofError(
            f'{file} ({what}) is not a trainprof report (no "schema": "{SCHEMA}"); give a '
            "`trainprof run --json` / `trainprof ci --json` file or a run directory"
        )
    if (error := shape_error(data)) is not None:
        raise TrainprofError(f"{file} ({what}) is not a trainprof report: {clean(error)}")
    run_dir = path if path.is_dir() else _stored_run_dir(data)
    return data, run_dir


def _stored_run_dir(data: dict[str, Any]) -> Path | None:
    stored = (data.get("run") or {}).get("run_dir")
    if isinstance(stored, str) and is_run_dir(stored) and (Path(stored) / rundir.REPORT).is_file():
        return Path(stored)
    return None
