"""CUDA memory growth: memory allocated on the GPU rises step after step, usually because
tensors that still hold their autograd graph are kept (a list of losses, a running total of a
tensor), until the job dies with CUDA out of memory.

Anti-pattern::

    losses = []
    for x, y in loader:
        loss = loss_fn(model(x), y)
        losses.append(loss)            # keeps every step's graph alive on the GPU

Best practice::

    losses.append(loss.item())         # or loss.detach()
"""

from __future__ import annotations

from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules.registry import Threshold, rule
from trainprof.analysis.stats import slope

MB = 2**20
MIN_TOTAL = Threshold("min_total", 64 * MB, "bytes", "allocated memory grows at least this much")
MIN_POINTS = Threshold("min_points", 6, "count", "timed steps in the steady window at least")
MIN_R2 = Threshold("min_r2", 0.8, "ratio", "goodness of the linear fit (R²)")


@rule(
    id="cuda-memory-growth",
    examples=("gpu_memory_creep",),
    title="CUDA memory growth",
    family="gpu",
    needs=("steps", "cuda"),
    thresholds=(MIN_TOTAL, MIN_POINTS, MIN_R2),
)
def check(m: Metrics) -> Finding | None:
    dv = m.device
    if dv is None or len(dv.memory) < MIN_POINTS.value:
        return None
    xs = [t for t, _b in dv.memory]
    ys = [float(b) for _t, b in dv.memory]
    b = slope(xs, ys)
    grown = ys[-1] - ys[0]
    if b != b or b <= 0 or grown < MIN_TOTAL.value:
        return None
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    ss_tot = sum((y - my) ** 2 for y in ys)
    ss_res = sum((y - (my + b * (x - mx))) ** 2 for x, y in zip(xs, ys, strict=True))
    r2 = 1 - ss_res / ss_tot if ss_tot > 0 else 0.0
    if r2 < MIN_R2.value:
        return None
    evidence = [
        f"allocated GPU memory {ys[0] / MB:.0f} → {ys[-1] / MB:.0f} MiB over {xs[-1] - xs[0]:.0f} s "
        f"({b * 60 / MB:.0f} MiB/min, steady: R²={r2:.2f}, {len(ys)} timed steps)",
    ]
    if dv.peak_reserved is not None:
        evidence.append(f"the caching allocator reserved up to {dv.peak_reserved / MB:.0f} MiB")
    return Finding(
        id="cuda-memory-growth",
        severity="warning",
        title=f"GPU memory grows steadily ({b * 60 / MB:.0f} MiB/min)",
        evidence=tuple(evidence),
        fix=(
            "keep numbers, not tensors: loss.item() or loss.detach() before storing or summing",
            "torch.cuda.memory._record_memory_history() for a few steps shows what holds memory",
        ),
    )
