"""Note the job's own MLflow or W&B run once, so that trainprof can add its report to it.

``mlflow.start_run``, ``MlflowClient.create_run`` (Lightning's ``MLFlowLogger``) and
``wandb.init`` are wrapped the moment their library finishes importing; the first run each
library returns is one info record (``mlflow_run``, ``wandb_run``): its id and where it is
stored. Nothing runs per step, and neither library is imported on the job's behalf.
"""

from __future__ import annotations

import functools
import os
import sys
from types import ModuleType
from typing import Any

from trainprof.probe import records

_noted: set[str] = set()


def wrap_mlflow(module: ModuleType) -> None:
    """The post-import hook for ``mlflow``."""
    start_run = getattr(module, "start_run", None)
    if callable(start_run):
        module.start_run = _noting(start_run, "mlflow_run", _mlflow_facts)  # type: ignore[attr-defined]
    client = getattr(sys.modules.get("mlflow.tracking.client"), "MlflowClient", None)
    create_run = getattr(client, "create_run", None)
    if isinstance(client, type) and callable(create_run):
        client.create_run = _noting(create_run, "mlflow_run", _mlflow_facts)  # type: ignore[attr-defined]


def wrap_wandb(module: ModuleType) -> None:
    """The post-import hook for ``wandb``."""
    init = getattr(module, "init", None)
    if callable(init):
        module.init = _noting(init, "wandb_run", _wandb_facts)  # type: ignore[attr-defined]


def install() -> None:
    """Hook both libraries' imports; a run noted by an earlier start of the probe is forgotten."""
    from trainprof.probe.import_hook import call_after_import

    _noted.clear()
    call_after_import("mlflow", wrap_mlflow)
    call_after_import("wandb", wrap_wandb)


def _noting(orig: Any, key: str, facts: Any) -> Any:
    """``orig`` that records ``facts(run, args)`` of the first run it returns as info ``key``."""

    @functools.wraps(orig)
    def start(*args: Any, **kwargs: Any) -> Any:
        run = orig(*args, **kwargs)
        if key not in _noted:
            try:
                found = facts(run, args)
                if found:
                    _noted.add(key)
                    records.record_info({key: found})
            except Exception as exc:
                records.record_error(key, exc)
        return run

    return start


def _mlflow_facts(run: Any, args: tuple[Any, ...]) -> dict[str, Any] | None:
    """A run from ``start_run`` (the tracking URI is MLflow's current one) or from a client's
    ``create_run`` (its first argument: the client, and its URI)."""
    info = getattr(run, "info", None)
    run_id = getattr(info, "run_id", None)
    if not run_id:
        return None
    uri = getattr(args[0], "tracking_uri", None) if args else None
    if not isinstance(uri, str):
        fluent = sys.modules.get("mlflow")
        uri = fluent.get_tracking_uri() if fluent is not None else None  # type: ignore[attr-defined]
    return {
        "run_id": str(run_id),
        "experiment_id": str(getattr(info, "experiment_id", "") or ""),
        "tracking_uri": str(uri) if uri else None,
        "cwd": os.getcwd(),  # a relative store path is the job's
    }


def _wandb_facts(run: Any, args: tuple[Any, ...]) -> dict[str, Any] | None:
    run_id = getattr(run, "id", None)
    settings = getattr(run, "settings", None)
    mode = str(getattr(settings, "mode", "") or "")
    if not run_id or mode == "disabled":
        return None
    return {
        "id": str(run_id),
        "project": getattr(run, "project", None) or None,
        "entity": getattr(run, "entity", None) or None,
        "mode": mode,
        "root_dir": str(getattr(settings, "root_dir", "") or "") or None,
    }
