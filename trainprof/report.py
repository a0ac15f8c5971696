"""A loaded run, analysed and reported: report.json in its run directory, the console report,
and the --json, --trace and --html files asked for."""

from __future__ import annotations

import contextlib
import errno
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from trainprof.analysis.findings import Verdict
from trainprof.analysis.outcome import job_exception, killed_at_shutdown
from trainprof.render.text import clean, make_console, shell_join
from trainprof.store import rundir
from trainprof.store.abandoned import runner_died, still_running
from trainprof.store.rundir import LIVE
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
    running = still_running(session)  # `trainprof report` of a job still running: so far
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
    verdict, tune_hint = _tuned(session, verdict)
    data = report_dict(session.meta, metrics, verdict)
    data["settings"] = run_settings(session, metrics)  # what `compare` and ci baselines match
    report_path = Path(session.run_dir) / rundir.REPORT
    data["run"]["so_far"] = running
    data["run"]["changes"], first_judged_s = live_changes(Path(session.run_dir))
    # A merged multi-node report belongs to no one node's directory, and a report so far is
    # not the run's: only --json keeps them.
    kept = session.meta.get("nodes") or running
    error = None if kept else write_run_json(report_path, data)
    if error is not None:  # a full disk: the report is still printed (and --json written)
        print(f"trainprof: could not write {report_path}: {error}", file=sys.stderr)
    if json_path is not None:
        try:
            write_user_json(json_path, data)
        except OSError as exc:  # the run directory still holds report.json: nothing is lost
            print(f"trainprof: could not write --json {json_path}: {exc.strerror}", file=sys.stderr)
    console = console or make_console(stderr=True)
    console_render.render(console, session.meta, metrics, verdict, verbose=verbose)
    if along := changes_line(data["run"]["changes"], first_judged_s):
        console.print(along)
    if tune_hint is not None:
        console.print(tune_hint)
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


def live_changes(run_dir: Path) -> tuple[list[dict[str, Any]], float | None]:
    """The findings' changes judged while the job ran (live.json), oldest first, and when the
    first judgement was; ([], None) if none."""
    try:
        data = json.loads((run_dir / LIVE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return [], None
    if not isinstance(data, dict):
        return [], None
    changes = data.get("changes")
    first = data.get("first_judged_s")
    kept = [c for c in changes if isinstance(c, dict)] if isinstance(changes, list) else []
    return kept, float(first) if isinstance(first, (int, float)) else None


def changes_line(changes: list[dict[str, Any]], first_judged_s: float | None) -> str | None:
    """One line for the findings that came or went while the job ran; None when none did.

    What appeared at the first judgement was there from the start: the report's own findings
    say it; only a change after that has a story to tell."""
    later = [
        c
        for c in changes
        if c.get("change") != "appeared"
        or not isinstance(c.get("t_s"), (int, float))
        or first_judged_s is None
        or c["t_s"] > first_judged_s
    ]
    if not later:
        return None
    told = [
        f"{c.get('id')} {c.get('change')} at {_clock(c.get('t_s'))}"
        for c in later[:12]
        if c.get("change") in ("appeared", "gone", "changed")
    ]
    more = f" … ({len(later) - 12} more in live.json)" if len(later) > 12 else ""
    return "along the run (judged while it ran): " + " · ".join(told) + more


def _clock(seconds: Any) -> str:
    if not isinstance(seconds, (int, float)):
        return "?"
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def _tuned(session: Session, verdict: Verdict) -> tuple[Verdict, str | None]:
    """The fixes with what `trainprof tune` measured of them on this command, if it ran; else,
    where a fix sets what tune measures, the one line that says how to measure it."""
    from trainprof.analysis.tuned import annotate, tunable
    from trainprof.tune.saved import latest_for

    meta = session.meta
    command = meta.get("command")
    cwd = meta.get("cwd")
    if (
        not isinstance(command, list)
        or not command
        or session.sampled is not None
        or meta.get("in_process")
    ):
        return verdict, None
    tuned = latest_for(command, meta.get("usable_cpus"), Path(cwd)) if cwd else None
    if tuned is not None:
        return annotate(verdict, tuned), None
    if not tunable(verdict):
        return verdict, None
    script = command[1:] if Path(str(command[0])).name.startswith("python") else ["--", *command]
    line = clean(shell_join(str(a) for a in script))  # a hostile argument stays visible text
    return verdict, f"measure these fixes before applying them: trainprof tune {line}"
