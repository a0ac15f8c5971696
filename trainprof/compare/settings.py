"""The settings a run trained with, as the report's ``settings`` object.

Throughput is only comparable between runs that did the same work per step on the same kind of
device: ``trainprof compare`` lists the settings that differ, and ``trainprof ci``'s baseline gate
refuses to judge across a changed batch size, world size, device or precision. Every value is
read from what the job recorded; one it did not record is ``None`` (never a guess).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from trainprof.analysis.metrics import Metrics, batches_per_step
from trainprof.store.session import Session

# Settings a baseline gate must find unchanged before it compares samples/s (the rest, such as
# workers or the torch version, are what a change is expected to tune: they are listed, not
# refused).
LIKE_WITH_LIKE = ("batch_size", "world_size", "device", "precision")

LABELS = {
    "batch_size": "batch size",
    "samples_per_step": "samples per step",
    "batches_per_step": "batches per step",
    "num_workers": "DataLoader workers",
    "persistent_workers": "persistent_workers",
    "pin_memory": "pin_memory",
    "torch_threads": "torch threads",
    "world_size": "world size",
    "device": "device",
    "precision": "precision",
    "torch_version": "torch version",
    "usable_cpus": "usable CPUs",
}

_VERSION = re.compile(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", re.MULTILINE)


def run_settings(session: Session, metrics: Metrics) -> dict[str, Any]:
    """The report's ``settings``: batch size, workers, threads, precision, device, world size,
    torch."""
    steady = metrics.steady
    loader = metrics.loaders[0].config if metrics.loaders else {}
    precision = metrics.activity.precision or {}
    batch = steady.batch_size if steady is not None else None
    if batch is None and isinstance(loader.get("batch_size"), int):
        batch = loader["batch_size"]
    return {
        "batch_size": batch,
        "samples_per_step": round(steady.samples_per_step, 2)
        if steady is not None and steady.samples_per_step
        else None,
        "batches_per_step": batches_per_step(metrics),
        "num_workers": loader.get("num_workers"),
        "persistent_workers": loader.get("persistent_workers"),
        "pin_memory": loader.get("pin_memory"),
        "torch_threads": _int_or_none(precision.get("intra_op_threads")),
        "world_size": _world_size(session),
        "device": _device(precision),
        "precision": _precision(precision, metrics.activity.autocast),
        "torch_version": torch_version(session),
        "usable_cpus": metrics.usable_cpus,
    }


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _world_size(session: Session) -> int | None:
    """torchrun's WORLD_SIZE as the ranks saw it; 1 for a job that ran without one."""
    if not session.processes:
        return None
    sizes = [p.header.get("world_size") for p in session.processes]
    known = [s for s in sizes if isinstance(s, int)]
    return max(known) if known else 1


def _device(precision: dict[str, Any]) -> str | None:
    device = precision.get("device")
    if not isinstance(device, str):
        return None
    name = precision.get("gpu_name")
    return f"{device} ({name})" if isinstance(name, str) and name else device


def _precision(precision: dict[str, Any], autocast: tuple[str, ...]) -> str | None:
    """The parameters' dtype, and the autocast contexts the job entered (``float32 + autocast
    cuda:bfloat16``)."""
    dtype = precision.get("dtype")
    if not isinstance(dtype, str):
        return None
    contexts = sorted(set(autocast))
    return dtype + (f" + autocast {', '.join(contexts)}" if contexts else "")


def torch_version(session: Session) -> str | None:
    """The version of the torch package the job ran: read from ``torch/version.py`` next to the
    torch files its stack samples and DataLoader settings name (the job's own torch, not
    whichever torch trainprof's interpreter would import). The probe records
    ``torch.__version__`` at the first optimizer step; before that, or without it, the file."""
    primary = session.primary
    for info in primary.infos if primary is not None else []:
        version = (info.get("precision") or {}).get("torch")
        if isinstance(version, str):
            return version
    for path in _torch_files(session):
        parts = Path(path).parts
        if "torch" not in parts:
            continue
        root = Path(*parts[: len(parts) - parts[::-1].index("torch")])
        try:
            text = (root / "version.py").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        m = _VERSION.search(text)
        if m:
            return m.group(1)
    return None


def _torch_files(session: Session) -> list[str]:
    files: list[str] = []
    primary = session.primary
    if primary is not None:
        for cfg in primary.loaders.values():
            for key in ("collate_at", "getitem_at"):
                at = cfg.get(key)
                if isinstance(at, list) and at and isinstance(at[0], str):
                    files.append(at[0])
    for span in session.spans[:200]:
        files.extend(f for _name, f, _line in span.frames if "torch" in f)
    return [f for f in files if "torch" in f]


def differences(a: dict[str, Any] | None, b: dict[str, Any] | None) -> list[tuple[str, Any, Any]]:
    """``(key, a's value, b's value)`` for each setting that differs, in ``LABELS`` order. A
    setting one run did not record differs from a recorded one."""
    a, b = a or {}, b or {}
    return [(k, a.get(k), b.get(k)) for k in LABELS if a.get(k) != b.get(k)]
