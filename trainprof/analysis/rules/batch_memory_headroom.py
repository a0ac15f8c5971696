"""Batch memory headroom: the job uses a small share of the GPU's memory, so each step gives
the GPU less work than it could hold. A bigger batch makes fewer, larger kernel launches and
usually more samples/s (compare samples/s, not it/s; scale the learning rate with the batch).

Anti-pattern::

    loader = DataLoader(ds, batch_size=16)           # 6 GiB of an 80 GiB GPU in use

Best practice::

    loader = DataLoader(ds, batch_size=128)          # measure: trainprof compare A B
    opt = torch.optim.AdamW(model.parameters(), lr=base_lr * 128 / 16)
"""

from __future__ import annotations

import math
import statistics

from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules.registry import Threshold, rule
from trainprof.units import fmt_bytes

USED_MAX = Threshold("used_max", 0.35, "share", "peak reserved CUDA memory below this share")
MIN_GROWTH = Threshold("min_growth", 2.0, "ratio", "the batch could grow at least this much")
USABLE = 0.85  # of the GPU's memory: the allocator's fragmentation and the CUDA context


@rule(
    id="batch-memory-headroom",
    title="Batch memory headroom",
    family="gpu",
    severity="info",
    needs=("steps", "cuda", "gpu_memory"),
    thresholds=(USED_MAX, MIN_GROWTH),
)
def check(m: Metrics) -> Finding | None:
    dv, s = m.device, m.steady
    total = int((m.activity.precision or {}).get("memory_total") or 0)
    if dv is None or s is None or dv.peak_reserved is None or dv.peak_allocated is None:
        return None
    if not total or dv.peak_reserved >= USED_MAX.value * total:
        return None
    if m.bottleneck is not None and m.bottleneck.verdict == "input-bound":
        return None  # a bigger batch needs more data per step: the input pipeline is the limit
    # Held across steps (weights, gradients, optimizer state) vs. what a step adds on top
    # (activations), which grows with the batch.
    held = statistics.median(a for _t, a in dv.memory) if dv.memory else None
    evidence = [
        f"peak {fmt_bytes(dv.peak_reserved)} reserved of {fmt_bytes(total)} "
        f"({dv.peak_reserved / total:.0%}); peak allocated {fmt_bytes(dv.peak_allocated)}"
    ]
    growth = None
    if held is not None and dv.peak_allocated > held:
        growth = (USABLE * total - held) / (dv.peak_allocated - held)
        if growth < MIN_GROWTH.value:
            return None
        evidence.append(
            f"between steps {fmt_bytes(int(held))} stays allocated (weights, gradients, "
            f"optimizer state); a step adds {fmt_bytes(int(dv.peak_allocated - held))}: "
            f"about {int(growth)}× the batch would fit (estimated: activations grow with it)"
        )
    bs = s.batch_size
    # A power-of-two step below the estimate: aligned shapes, and room for the estimate's error.
    times = 2 ** int(math.log2(growth)) if growth else 0
    target = f"batch_size={bs * times} ({times}×)" if bs and times else "a larger batch_size"
    return Finding(
        id="batch-memory-headroom",
        severity="info",
        title=f"The job uses {dv.peak_reserved / total:.0%} of the GPU's memory",
        evidence=tuple(evidence),
        fix=(
            f"try {target} (or fewer gradient-accumulation micro-steps) and scale the "
            "learning rate with it; compare samples/s with `trainprof compare`",
        ),
    )
