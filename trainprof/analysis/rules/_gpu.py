"""What the CUDA rules share: the device's compute capability."""

from __future__ import annotations

from trainprof.analysis.metrics import Metrics

# Tensor Cores (fp16) arrived with compute capability 7.0; bf16 and TF32 with 8.0 (Ampere).
TENSOR_CORES = (7, 0)
AMPERE = (8, 0)


def capability(m: Metrics) -> tuple[int, int] | None:
    cap = (m.activity.precision or {}).get("capability")
    return (int(cap[0]), int(cap[1])) if cap and len(cap) == 2 else None
