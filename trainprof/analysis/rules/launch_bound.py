"""Launch-bound: the GPU waits for the host to launch kernels. Many tiny kernels per step, each
a few microseconds of GPU work behind tens of microseconds of Python and dispatch: the GPU sits
mostly idle although no data wait or stall explains it.

Anti-pattern::

    model = SmallMLP().cuda()
    for x, y in loader:                  # batch_size=16: kernels too small to fill the GPU
        loss = loss_fn(model(x), y)      # hundreds of launches per step
        loss.backward(); opt.step()

Best practice::

    loader = DataLoader(dataset, batch_size=512)               # more work per launch
    model = torch.compile(model, mode="reduce-overhead")       # CUDA graphs: one launch
    opt = torch.optim.AdamW(model.parameters(), fused=True)    # one kernel for all params
"""

from __future__ import annotations

from trainprof.analysis.findings import Finding
from trainprof.analysis.ledger import DATA
from trainprof.analysis.metrics import HOST_WORK, Metrics
from trainprof.analysis.rules._common import STEP_BUCKETS, ms
from trainprof.analysis.rules.registry import Threshold, rule

UTIL_LOW = Threshold("util_low", 50.0, "%", "mean GPU utilization (NVML) below this")
OTHER_MAX = Threshold(
    "other_max", 0.15, "share", "with data wait and host-work stalls each below this share"
)


@rule(
    id="launch-bound",
    examples=("gpu_launch_bound",),
    title="Launch-bound",
    family="gpu",
    needs=("steps", "cuda", "gpu"),
    claims=("forward", "backward", "optimizer", "step"),
    thresholds=(UTIL_LOW, OTHER_MAX),
)
def check(m: Metrics) -> Finding | None:
    led, s = m.ledger, m.steady
    util = m.gpu_util_mean
    if led is None or s is None or util is None or util >= UTIL_LOW.value:
        return None
    data, host = led.share(*DATA), led.share(*HOST_WORK)
    if data >= OTHER_MAX.value or host >= OTHER_MAX.value:
        return None  # input-bound, a stall or loop work explain the idle GPU better
    if m.activity.debug is not None and m.activity.debug.launch_blocking_on:
        return None  # launch-blocking explains it, and bigger batches would not be the fix
    evidence = [
        f"the GPU was {util:.0f}% utilized (NVML) while the loop neither waited for data "
        f"({data:.0%}) nor stalled or ran loop code ({host:.0%})",
        f"{s.steps_per_s:.1f} it/s, step p50 {ms(s.p50_s)}"
        + (f", batch size {s.batch_size}" if s.batch_size else ""),
    ]
    dv = m.device
    if dv is not None and dv.host_fwd_s and dv.fwd_s:
        evidence.append(
            f"forward takes {ms(dv.host_fwd_s)} on the host and {ms(dv.fwd_s)} on the GPU's "
            "clock: the GPU keeps pace with the host's launches, not the other way round"
        )
    return Finding(
        id="launch-bound",
        severity="warning",
        title=f"Launch-bound: the GPU waits for kernel launches ({util:.0f}% utilized)",
        evidence=tuple(evidence),
        fix=(
            "more work per launch: a bigger batch (compare samples/s, not it/s)",
            "fewer launches: torch.compile(model, mode='reduce-overhead') (CUDA graphs), "
            "fused optimizers (torch.optim.AdamW(..., fused=True))",
        ),
        wants=tuple((b, 1.0 - util / 100.0) for b in STEP_BUCKETS),
    )
