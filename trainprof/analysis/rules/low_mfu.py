"""Low MFU: the GPU is the bottleneck, yet its math units do a small share of what they can.
The model's FLOPs of one step (counted once, with torch's ``FlopCounterMode``) at the steady
step rate, against the device's dense peak for the precision in use.

Anti-pattern::

    model = Net().cuda()                              # fp32 matmuls, odd layer widths
    for x, y in loader:
        loss = loss_fn(model(x), y)                   # many small eager kernels
        loss.backward(); opt.step()

Best practice::

    model = torch.compile(Net().cuda())               # fused kernels
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = loss_fn(model(x), y)                   # Tensor Cores
"""

from __future__ import annotations

from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._structure import facts, worth_tuning
from trainprof.analysis.rules.registry import Threshold, rule

MFU_LOW = Threshold("mfu_low", 0.30, "share", "model FLOPs utilization below this")


@rule(
    id="low-mfu",
    title="Low MFU",
    family="gpu",
    severity="info",
    needs=("steps", "cuda", "flops"),
    thresholds=(MFU_LOW,),
)
def check(m: Metrics) -> Finding | None:
    u = m.mfu
    if u is None or u.mfu is None or u.mfu >= MFU_LOW.value or not worth_tuning(m):
        return None
    evidence = [
        f"{u.achieved_tflops:.1f} TFLOP/s achieved of {u.peak_tflops:g} TFLOP/s ({u.precision} "
        f"dense peak of {u.gpu_name}): MFU {u.mfu:.1%}",
        f"{u.flops_per_step / 1e9:,.1f} GFLOP a step (step {u.counted_step} counted with "
        f"FlopCounterMode) at {m.steady.steps_per_s:.1f} it/s"
        if m.steady
        else "",
    ]
    if u.failed_ops:
        evidence.append(f"{u.failed_ops} ops could not be counted: the true MFU is higher")
    if m.collectives_on_device:
        evidence.append(
            f"the step includes the ranks' {m.collectives_on_device} collectives (not measured "
            "apart): time spent communicating lowers MFU as much as slow math"
        )
    fix = []
    if u.precision in ("fp32", "tf32"):
        fix.append(
            'torch.autocast("cuda", dtype=torch.bfloat16) around forward and loss: the bf16 '
            "peak is about twice TF32's and many times fp32's"
        )
    if facts(m).get("misaligned"):
        fix.append("pad Linear/Conv widths to multiples of 8 (see misaligned-dims)")
    if m.collectives_on_device:
        fix.append(
            "tell communication from math: run the same per-rank batch on one GPU and compare "
            "its steps/s (`trainprof compare`); if it is much faster, overlap and shrink the "
            "all-reduce (DDP's bucket_cap_mb, no_sync() over accumulation steps, the "
            "bf16_compress_hook comm hook)"
        )
    fix += [
        "torch.compile(model): fuses the elementwise kernels between the matmuls",
        "F.scaled_dot_product_attention for attention (flash kernels), fused optimizers",
        "a bigger batch if GPU memory allows (see batch-memory-headroom)",
    ]
    return Finding(
        id="low-mfu",
        severity="info",
        title=f"The GPU is the bottleneck at {u.mfu:.0%} MFU",
        evidence=tuple(e for e in evidence if e),
        fix=tuple(fix),
    )
