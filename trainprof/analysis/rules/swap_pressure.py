"""Swap pressure: the machine swaps while the job trains, so steps become unpredictable.

Anti-pattern::

    DataLoader(dataset, num_workers=16, prefetch_factor=8)  # on a machine without spare RAM

Best practice::

    DataLoader(dataset, num_workers=4, prefetch_factor=2)  # and bounded caches
"""

from __future__ import annotations

from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules.registry import Threshold, rule

MB = 2**20
IO_BPS = Threshold("io_rate", 1 * MB, "bytes/s", "swap traffic (in + out) averaged over the run")


@rule(
    id="swap-pressure",
    title="Swap pressure",
    family="memory",
    needs=("samples",),
    thresholds=(IO_BPS,),
    compounds={
        "memory-growth": (
            "the job's growing memory is what fills RAM and sends pages to swap, and each "
            "swapped page read back stalls the step: bound the growth first, and the swapping "
            "goes with it"
        ),
    },
)
def check(m: Metrics) -> Finding | None:
    io = m.activity.swap_io_bps_mean
    if io is None or io < IO_BPS.value:
        return None
    used = m.activity.swap_used_max
    total = m.activity.swap_total
    used_text = f"{used / MB:.0f} MiB" if used is not None else "an unknown amount"
    total_text = f"{total / MB:.0f} MiB" if total is not None else "an unknown total"
    return Finding(
        id="swap-pressure",
        severity="warning",
        title=f"The machine is swapping during training ({io / MB:.1f} MiB/s)",
        evidence=(
            f"swap traffic averaged {io / MB:.1f} MiB/s (in + out) over the run",
            f"swap used peaked at {used_text} of {total_text}",
        ),
        fix=(
            "use less host memory: fewer DataLoader workers, smaller prefetch_factor, "
            "bounded caches, smaller batches",
            "or run on a machine with more RAM; swapping makes every step unpredictable",
        ),
    )
