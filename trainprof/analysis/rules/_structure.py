"""What the GPU-usage advice rules share: the probe's structure facts, read defensively (a
corrupt record reads as absent), and when the advice matters."""

from __future__ import annotations

from typing import Any

from trainprof.analysis.metrics import Metrics


def facts(m: Metrics) -> dict[str, Any]:
    s = m.activity.structure
    return s if isinstance(s, dict) else {}


def names(value: Any) -> list[str]:
    """Module names from a list of [name, ...] rows or of names."""
    out = []
    for row in value if isinstance(value, list) else []:
        name = row[0] if isinstance(row, list) and row else row
        if isinstance(name, str):
            out.append(name)
    return out


def half_precision(m: Metrics) -> bool:
    """fp16/bf16 math: autocast on CUDA, or half parameters (Tensor Cores in use)."""
    dtype = (m.activity.precision or {}).get("dtype")
    return dtype in ("float16", "bfloat16") or any(
        a.startswith("cuda") for a in m.activity.autocast
    )


def worth_tuning(m: Metrics) -> bool:
    """Advice on how well the GPU is used matters when the GPU is the bottleneck (or when that
    is not known); on an input- or host-bound job the GPU waits anyway."""
    return m.bottleneck is None or m.bottleneck.verdict == "gpu-bound"
