"""A loaded run, analysed and reported: report.json in its run directory, the console report,
and the --json, --trace and --html files asked for."""

from __future__ import annotations

import contextlib
import errno
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from trainprof.analysis.outcome import job_exception, killed_at_shutdown
from trainprof.render.text import make_console
from trainprof.store import rundir
from trainprof.store.abandoned import runner_died
from trainprof.store.session import Session

if TYPE_CHECKING:
    from trainprof.collect.live import LiveView


def report(
    session: Session,
    json_path: Path | None,
    verbose: bool = False,
    console: Console | None = None,
    live: LiveView | None = None,
    trace_path: Path | None = None,
    html_path: Path | None = None,
) -> dict[str, Any]:
    """Analyse a loaded run, store report.json in its directory, print the console report
    (to ``console``; stderr by default), and write the trace and the HTML report if asked.
    With ``live``, the status line says ``analysing…`` once the job has ended more than half
    a second ago."""
    runner_died(session)
    session.meta.setdefault("exception", job_exception(session))
    session.meta.setdefault("killed_at_shutdown", killed_at_shutdown(session))
    started = float(session.meta.get("t_launch") or time.monotonic())
    ended = started + float(session.meta.get("wall_s") or 0.0)
    busy = live.busy("analysing…", started, since=ended) if live else contextlib.nullcontext()
    from trainprof.analysis.pipeline import analyze
    from trainprof.compare.settings import run_settings
    from trainprof.render import console as console_render
    from trainprof.render.json_report import report_dict

    with busy:
        metrics, verdict = analyze(session)
    data = report_dict(session.meta, metrics, verdict)
    data["settings"] = run_settings(session, metrics)  # what `compare` and ci baselines match
    report_path = Path(session.run_dir) / rundir.REPORT
    # A merged multi-node report belongs to no one node's directory: only --json keeps it.
    error = None if session.meta.get("nodes") else write_run_json(report_path, data)
    if error is not None:  # a full disk: the report is still printed (and --json written)
        print(f"trainprof: could not write {report_path}: {error}", file=sys.stderr)
    if json_path is not None:
        try:
            write_user_json(json_path, data)
        except OSError as exc:  # the run directory still holds report.json: nothing is lost
            print(f"trainprof: could not write --json {json_path}: {exc.strerror}", file=sys.stderr)
    console = console or make_console(stderr=True)
    console_render.render(console, session.meta, metrics, verdict, verbose=verbose)
    if trace_path is not None or html_path is not None:
        from trainprof.render.html import write_views

        for line in write_views(session, metrics, verdict, trace_path, html_path):
            console.print(line)
    return data


def write_user_json(path: Path, data: dict[str, Any]) -> None:
    """``--json PATH``: created 0600; ``-`` is standard output."""
    import json

    rundir.write_user_file(path, json.dumps(data, indent=1) + "\n")


def write_run_json(path: Path, data: Any) -> str | None:
    """Write a JSON file of the run directory; on a full disk, give back the space held for the
    end of the run (``rundir.reserve_space``) and try again. The error, or None."""
    try:
        rundir.write_json(path, data)
        return None
    except OSError as exc:
        error = exc
    if error.errno in (errno.ENOSPC, errno.EDQUOT) and rundir.release_space(path.parent):
        try:
            rundir.write_json(path, data)
            return None
        except OSError as exc:
            error = exc
    return error.strerror or str(error)
