"""Model FLOPs utilization: the FLOPs of one counted step (``probe/flops.py``) times the steady
step rate, against the device's dense peak for the precision the matmuls run in. Pure.

Peaks are NVIDIA's datasheet figures for dense math (the "with sparsity" figures halved), in
TFLOP/s. A GPU missing from the table gets its achieved TFLOP/s and no MFU: a guessed peak
would make a guessed percentage.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# (words that must all appear in torch.cuda.get_device_name(), lower case) →
# dense peak TFLOP/s by precision. First match wins: the more specific names come first.
PEAKS: tuple[tuple[tuple[str, ...], dict[str, float]], ...] = (
    (("h100", "pcie"), {"fp32": 51.0, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0}),
    (("h100", "nvl"), {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5}),
    (("h100",), {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4}),  # SXM5
    (("h200", "nvl"), {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5}),
    (("h200",), {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4}),  # SXM
    (("a100",), {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}),
    (("l40s",), {"fp32": 91.6, "tf32": 183.0, "bf16": 362.0, "fp16": 362.0}),
    (("l4",), {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0}),
    (("a10",), {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0, "fp16": 125.0}),
    (("v100", "pcie"), {"fp32": 14.0, "fp16": 112.0}),
    (("v100",), {"fp32": 15.7, "fp16": 125.0}),
)


def precision_in_use(precision: dict[str, Any] | None, autocast: tuple[str, ...]) -> str | None:
    """The precision the model's matmuls run in: an autocast dtype on CUDA, else the
    parameters' dtype, with fp32 matmuls on Tensor Cores (TF32) when torch allows it."""
    if precision is None:
        return None
    for a in autocast:
        device, _, fast = a.partition(":")
        if device.startswith("cuda"):
            if "bfloat16" in fast:
                return "bf16"
            if "float16" in fast:
                return "fp16"
    dtype = precision.get("dtype")
    if dtype == "bfloat16":
        return "bf16"
    if dtype == "float16":
        return "fp16"
    if dtype != "float32":
        return None
    tf32 = precision.get("matmul_precision") in ("high", "medium") or precision.get(
        "cuda_matmul_tf32"
    )
    cap = precision.get("capability") or [0, 0]
    return "tf32" if tf32 and cap[0] >= 8 else "fp32"


def peak_tflops(gpu_name: str | None, prec: str | None) -> float | None:
    if not gpu_name or prec is None:
        return None
    # Whole words: "a10" must not match an A10G, nor "l4" an L40.
    words = set(re.split(r"[^a-z0-9]+", gpu_name.lower()))
    for fragments, peaks in PEAKS:
        if all(f in words for f in fragments):
            # A precision without Tensor-Core support on this card runs at its fp32 rate.
            return peaks.get(prec, peaks["fp32"] if prec in ("tf32", "bf16") else None)
    return None


@dataclass(frozen=True)
class Mfu:
    flops_per_step: int
    achieved_tflops: float  # at the steady step rate
    precision: str | None
    gpu_name: str | None
    peak_tflops: float | None  # None: not in the table
    counted_step: int
    failed_ops: int

    @property
    def mfu(self) -> float | None:
        return self.achieved_tflops / self.peak_tflops if self.peak_tflops else None

    def to_json(self) -> dict[str, object]:
        mfu = self.mfu
        return {
            "flops_per_step": self.flops_per_step,
            "achieved_tflops": round(self.achieved_tflops, 3),
            "precision": self.precision,
            "gpu_name": self.gpu_name,
            "peak_tflops": self.peak_tflops,
            "mfu": None if mfu is None else round(mfu, 4),
            "counted_step": self.counted_step,
            "failed_ops": self.failed_ops,
        }


def flop_count(infos: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The probe's ``flops`` record (a count, or the reason there is none)."""
    return next((i["flops"] for i in infos if isinstance(i.get("flops"), dict)), None)


def counted_steps(flops: dict[str, Any] | None) -> int:
    """The last step the counter ran through (0: none): every step up to it is warm-up."""
    if not flops or flops.get("per_step") is None or flops.get("step") is None:
        return 0
    return int(flops["step"]) + max(1, int(flops.get("steps") or 1)) - 1


def mfu(
    flops: dict[str, Any] | None,
    steps_per_s: float | None,
    precision: dict[str, Any] | None,
    autocast: tuple[str, ...],
) -> Mfu | None:
    if not flops or flops.get("per_step") is None or not steps_per_s or steps_per_s <= 0:
        return None
    prec = precision_in_use(precision, autocast)
    name = (precision or {}).get("gpu_name")
    return Mfu(
        flops_per_step=int(flops["per_step"]),
        achieved_tflops=int(flops["per_step"]) * steps_per_s / 1e12,
        precision=prec,
        gpu_name=name,
        peak_tflops=peak_tflops(name, prec) if (precision or {}).get("device") == "cuda" else None,
        counted_step=int(flops.get("step") or 0),
        failed_ops=int(flops.get("failed_ops") or 0),
    )
