"""Add trainprof's summary metrics, findings and HTML report to the job's W&B run, with wandb.

The job's run is the first ``wandb.init`` the probe saw; trainprof resumes it after the job
ended (``resume="allow"``, offline where the job was offline, in the job's W&B directory) and
adds the summary numbers to the run's summary, the findings as a table and the report as an
HTML panel. A job with no W&B run gets one of trainprof's own, named after the run directory,
where W&B's environment says (``WANDB_PROJECT``, ``WANDB_MODE``, ``WANDB_DIR``).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from typing import Any

from trainprof.errors import TrainprofError
from trainprof.export import run_summary
from trainprof.export.extras import need
from trainprof.store.session import Session

OPTION = "--wandb"
PROJECT = "trainprof"  # a run of trainprof's own, where WANDB_PROJECT names none


def check() -> None:
    """Before the job: wandb installed, else the one-line TrainprofError naming the extra.
    Only looked up, not imported: importing it takes seconds the job would wait."""
    if importlib.util.find_spec("wandb") is None:
        need("wandb", "wandb", OPTION)  # raises, naming the extra


def write(session: Session, report: dict[str, Any]) -> tuple[str, str, bool]:
    """Log to the job's run, or to a new one; (run id, where it is, whether it was the job's)."""
    wandb = need("wandb", "wandb", OPTION)
    own = run_summary.job_run(session, "wandb_run")
    if own is not None and not isinstance(own.get("id"), str):
        own = None
    settings = wandb.Settings(console="off", silent=True)
    mode = own.get("mode") if own is not None else os.environ.get("WANDB_MODE")
    if mode == "disabled":
        raise TrainprofError(f"{OPTION}: W&B is disabled here (WANDB_MODE=disabled); nothing added")
    if mode not in ("offline", "dryrun") and not wandb.login(prompt=False, verify=False):
        raise TrainprofError(
            f"{OPTION}: not logged in to W&B (wandb login, or WANDB_MODE=offline); nothing added"
        )
    if own is not None:
        mode = mode if mode in ("online", "offline") else None
        run = wandb.init(
            id=own["id"],
            project=own.get("project"),
            entity=own.get("entity"),
            dir=own.get("root_dir"),
            mode=mode,
            resume="allow",
            settings=settings,
        )
        mine = False
    else:
        run = wandb.init(
            project=os.environ.get("WANDB_PROJECT") or PROJECT,
            name=run_summary.job_name(session),
            job_type="trainprof",
            config={"trainprof_run_dir": str(session.run_dir)},
            settings=settings,
        )
        mine = True
    try:
        run.summary.update(run_summary.metrics(report))
        if (verdict := run_summary.verdict(report)) is not None:
            run.summary["trainprof/bottleneck"] = verdict
        findings = wandb.Table(columns=run_summary.COLUMNS, data=run_summary.finding_rows(report))
        page = wandb.Html(run_summary.html_report(session), inject=False)
        # In the summary, not the history: a resumed offline run does not know its last step.
        run.summary.update({"trainprof/findings": findings, "trainprof/report": page})
        where = str(run.settings.sync_dir) if run.offline else str(run.url or run.project)
        run_id = str(run.id)
    finally:
        run.finish()
    return run_id, where, not mine


def export(session: Session, report: dict[str, Any]) -> str:
    """Log to W&B and return the line that tells the user which run holds it."""
    try:
        run_id, where, job_s = write(session, report)
    except TrainprofError as exc:
        return f"trainprof: {exc}"
    except Exception as exc:  # W&B refused (no login, no network): said, not raised
        said = " ".join(str(exc).split())  # one line, however the library words it
        return f"trainprof: could not log to W&B ({type(exc).__name__}: {said})"[:400]
    whose = "the job's run" if job_s else "a run of trainprof's own"
    return f"W&B: trainprof's metrics, findings and report added to {whose} {run_id} ({where})"


def printing_export() -> Callable[[Session, dict[str, Any]], None]:
    """The runner's ``on_report``: export, then say where on stderr."""

    def on_report(session: Session, report: dict[str, Any]) -> None:
        print(export(session, report), file=sys.stderr)

    return on_report
