"""No mixed precision: a model trains entirely in fp32 on a GPU with Tensor Cores.

Seed 001. Read at the first optimizer step: the parameters' dtype and device, the TF32
settings, and whether any ``torch.autocast("cuda")`` context was entered.

Anti-pattern::

    loss = loss_fn(model(x), y)          # fp32 matmuls, no Tensor Cores
    loss.backward()

Best practice::

    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = loss_fn(model(x), y)
    loss.backward()
"""

from __future__ import annotations

from trainprof.analysis.findings import Finding, Severity
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._gpu import AMPERE, TENSOR_CORES, capability
from trainprof.analysis.rules.registry import Threshold, rule

MIN_CAPABILITY = Threshold("min_capability", 7.0, "count", "GPU compute capability (Tensor Cores)")


@rule(
    id="no-mixed-precision",
    examples=("gpu_fp32",),
    title="No mixed precision",
    family="gpu",
    needs=("steps", "cuda"),
    thresholds=(MIN_CAPABILITY,),
)
def check(m: Metrics) -> Finding | None:
    p = m.activity.precision or {}
    cap = capability(m)
    if p.get("dtype") != "float32" or cap is None or cap < TENSOR_CORES:
        return None
    if any(a.startswith("cuda") for a in m.activity.autocast):
        return None
    ampere = cap >= AMPERE
    tf32_off = p.get("matmul_precision") == "highest" and not p.get("cuda_matmul_tf32")
    evidence = [
        f"parameters are float32 on {p.get('gpu_name', 'the GPU')} (compute capability "
        f'{cap[0]}.{cap[1]}), and no torch.autocast("cuda") context was entered',
    ]
    if ampere and tf32_off:
        evidence.append(
            "TF32 is off too (torch.get_float32_matmul_precision() == 'highest'): "
            "fp32 matmuls run without Tensor Cores"
        )
    dtype = "torch.bfloat16" if ampere else "torch.float16"
    fix = [f'with torch.autocast("cuda", dtype={dtype}): around the forward pass and the loss']
    if not ampere:
        fix.append(
            "with float16, scale the loss: scaler = torch.amp.GradScaler(); scaler.scale(loss).backward()"
        )
    if ampere:
        fix.append('torch.set_float32_matmul_precision("high") enables TF32 for what stays in fp32')
    severity: Severity = "warning"
    b = m.bottleneck
    if b is not None and b.verdict in ("input-bound", "host-bound"):
        # Faster math does not speed up a step the GPU waits through (an H200 launch-bound job
        # got this warning second, where autocast would only add cast kernels to launch).
        severity = "info"
        evidence.append(
            f"the GPU is not what bounds this job ({b.verdict}): faster math pays off once "
            "that is fixed"
        )
    return Finding(
        id="no-mixed-precision",
        severity=severity,
        title="Training runs entirely in fp32 on a GPU with Tensor Cores",
        evidence=tuple(evidence),
        fix=tuple(fix),
    )
