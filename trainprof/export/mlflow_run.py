"""Add trainprof's summary metrics, findings and HTML report to the job's MLflow run, with MLflow.

The job's run is the first ``mlflow.start_run`` the probe saw; trainprof logs to it through
``MlflowClient`` after the job ended (a finished run takes more metrics and artifacts). A job
with no MLflow run gets one of trainprof's own, named after the run directory, in the tracking
store and experiment MLflow's environment variables name (``MLFLOW_TRACKING_URI``,
``MLFLOW_EXPERIMENT_NAME``), else MLflow's defaults.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from trainprof.errors import TrainprofError
from trainprof.export import run_summary
from trainprof.export.extras import need
from trainprof.store.session import Session

OPTION = "--mlflow"
ARTIFACTS = "trainprof"  # the folder of the run's artifacts trainprof writes
NAMED_STORES = ("databricks", "databricks-uc", "uc")  # tracking URIs that are not paths


def check() -> None:
    """Before the job: MLflow installed, else the one-line TrainprofError naming the extra.
    Only looked up, not imported: importing it takes seconds the job would wait."""
    if importlib.util.find_spec("mlflow") is None:
        need("mlflow", "mlflow", OPTION)  # raises, naming the extra


def write(session: Session, report: dict[str, Any]) -> tuple[str, str, bool]:
    """Log to the job's run, or to a new one; (run id, tracking URI, whether it was the job's)."""
    need("mlflow", "mlflow", OPTION)
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    own = run_summary.job_run(session, "mlflow_run")
    run_id = own.get("run_id") if own else None
    if isinstance(run_id, str) and run_id:
        uri = _absolute(own.get("tracking_uri"), own.get("cwd")) if own else None
        if uri is not None and _is_file_store(uri):
            # The job wrote to this file store; MLflow 3 asks a new writer to opt in to it.
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        client = MlflowClient(tracking_uri=uri)
        mine = False
    else:
        client = MlflowClient()
        run_id = client.create_run(
            _experiment_id(client),
            run_name=run_summary.job_name(session),
            tags={"trainprof.run_dir": str(session.run_dir)},
        ).info.run_id
        mine = True
    now = _now_ms()
    values = [Metric(k, v, now, 0) for k, v in run_summary.metrics(report).items()]
    if values:
        client.log_batch(run_id, metrics=values)
    if (verdict := run_summary.verdict(report)) is not None:
        client.set_tag(run_id, "trainprof.bottleneck", verdict)
    ids = ",".join(str(f.get("id")) for f in report.get("findings") or [])
    client.set_tag(run_id, "trainprof.findings", ids or "none")
    client.log_text(run_id, run_summary.findings_markdown(report), f"{ARTIFACTS}/findings.md")
    client.log_dict(run_id, report, f"{ARTIFACTS}/report.json")
    with tempfile.TemporaryDirectory(prefix="trainprof-mlflow-") as tmp:
        page = Path(tmp) / "report.html"
        page.write_text(run_summary.html_report(session), encoding="utf-8")
        client.log_artifact(run_id, str(page), ARTIFACTS)
    if mine:
        client.set_terminated(run_id)
    return run_id, str(client.tracking_uri), not mine


def export(session: Session, report: dict[str, Any]) -> str:
    """Log to MLflow and return the line that tells the user which run holds it."""
    try:
        run_id, uri, job_s = write(session, report)
    except TrainprofError as exc:
        return f"trainprof: {exc}"
    except Exception as exc:  # the store refused (a server down, a deleted run): said, not raised
        said = " ".join(str(exc).split())  # one line, however the library words it
        if "sqlite:" in said and importlib.util.find_spec("sqlalchemy") is None:
            return (
                "trainprof: could not log to MLflow: its default store (SQLite) needs the full "
                "`mlflow` package; or set MLFLOW_TRACKING_URI to your tracking server"
            )
        return f"trainprof: could not log to MLflow ({type(exc).__name__}: {said})"[:400]
    whose = "the job's run" if job_s else "a run of trainprof's own"
    return f"MLflow: trainprof's metrics, findings and report added to {whose} {run_id} ({uri})"


def printing_export() -> Callable[[Session, dict[str, Any]], None]:
    """The runner's ``on_report``: export, then say where on stderr."""

    def on_report(session: Session, report: dict[str, Any]) -> None:
        print(export(session, report), file=sys.stderr)

    return on_report


def _absolute(uri: Any, cwd: Any) -> str | None:
    """The job's tracking URI, a relative store path made absolute against the job's cwd."""
    if not isinstance(uri, str) or not uri:
        return None
    parsed = urlparse(uri)
    base = Path(cwd) if isinstance(cwd, str) else Path.cwd()
    if parsed.scheme == "" and not Path(uri).is_absolute() and uri not in NAMED_STORES:
        return (base / uri).resolve().as_uri()
    if parsed.scheme == "file" and not parsed.netloc and not uri.startswith("file:/"):
        return (base / uri[len("file:") :]).resolve().as_uri()
    if parsed.scheme == "sqlite" and uri.startswith("sqlite:///") and uri[10:11] != "/":
        return "sqlite:///" + str((base / uri[10:]).resolve())
    return uri


def _is_file_store(uri: str) -> bool:
    return urlparse(uri).scheme in ("", "file")


def _experiment_id(client: Any) -> str:
    """The experiment MLflow's environment names (by id, then name, made where missing), else
    the default one."""
    exp_id = os.environ.get("MLFLOW_EXPERIMENT_ID")
    if exp_id:
        return exp_id
    name = os.environ.get("MLFLOW_EXPERIMENT_NAME")
    if not name:
        return "0"
    found = client.get_experiment_by_name(name)
    return str(found.experiment_id) if found is not None else str(client.create_experiment(name))


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)
