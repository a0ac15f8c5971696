"""GPU under-utilized: the GPU is idle much of the time and no more specific rule explains why.

The rule of last resort: it is dropped when any other warning names a cause.

Anti-pattern::

    model = TinyMLP().cuda()
    for x, y in loader:          # batch_size=8: kernels too small to fill the GPU
        ...

Best practice::

    loader = DataLoader(dataset, batch_size=256)
    model = torch.compile(model, mode="reduce-overhead")
"""

from __future__ import annotations

from trainprof.analysis.findings import Finding
from trainprof.analysis.ledger import BUCKETS
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._common import ms
from trainprof.analysis.rules.registry import Threshold, rule

UTIL_LOW = Threshold("util_low", 50.0, "%", "mean GPU utilization below this")


@rule(
    id="gpu-underutilized",
    title="GPU under-utilized",
    family="gpu",
    last_resort=True,
    needs=("steps", "gpu"),
    claims=BUCKETS,
    thresholds=(UTIL_LOW,),
)
def check(m: Metrics) -> Finding | None:
    util = m.gpu_util_mean
    if util is None or util >= UTIL_LOW.value:
        return None
    s = m.steady
    assert s is not None
    return Finding(
        id="gpu-underutilized",
        severity="warning",
        title=f"The GPU is busy only {util:.0f}% of the time",
        evidence=(
            f"mean GPU utilization {util:.0f}% over the steady run{_which(m)}; no input, "
            "stall or logging problem explains it",
            f"{s.steps_per_s:.1f} it/s, step p50 {ms(s.p50_s)}",
        ),
        fix=(
            "a bigger batch per step (samples/s, not it/s, is what to compare)",
            "reduce per-step launch overhead: torch.compile(model, mode='reduce-overhead') "
            "or CUDA graphs",
        ),
        wants=tuple((b, 1.0 - util / 100.0) for b in BUCKETS),
    )


def _which(m: Metrics) -> str:
    """`` (GPU 3 of 8)`` where the machine has GPUs the job does not use."""
    return f" ({m.gpus.describe()})" if m.gpus is not None and m.gpus.of > 1 else ""
