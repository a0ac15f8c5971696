"""Straggler rank: one torchrun rank waits for data longer than the others, and in synchronous
data-parallel training every rank waits for the slowest at each gradient all-reduce.

Anti-pattern::

    sampler = DistributedSampler(dataset)   # uneven shards, or one rank's node is slow
    loader = DataLoader(dataset, sampler=sampler, num_workers=0)

Best practice::

    sampler = DistributedSampler(dataset, drop_last=True)
    loader = DataLoader(dataset, sampler=sampler, num_workers=4, persistent_workers=True)
"""

from __future__ import annotations

from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._common import STEP_BUCKETS, ms
from trainprof.analysis.rules.registry import Threshold, rule

EXTRA_WAIT = Threshold(
    "extra_wait", 0.20, "share", "one rank's data wait beyond the median rank's, of a step"
)


@rule(
    id="straggler-rank",
    title="Straggler rank",
    family="distributed",
    needs=("ranks",),
    claims=STEP_BUCKETS + ("data_wait",),
    thresholds=(EXTRA_WAIT,),
)
def check(m: Metrics) -> Finding | None:
    ranks = m.activity.ranks
    if len(ranks) < 2:
        return None
    slow = max(ranks, key=lambda r: r.wait_per_step_s)
    others = sorted(r.wait_per_step_s for r in ranks if r is not slow)
    typical = others[len(others) // 2]  # the median of the other ranks
    step = slow.p50_s
    if step <= 0 or (slow.wait_per_step_s - typical) / step < EXTRA_WAIT.value:
        return None
    extra = slow.wait_per_step_s - typical
    frac = min(1.0, extra / step)
    return Finding(
        id="straggler-rank",
        severity="warning",
        title=f"Rank {slow.rank} waits for data {ms(extra)} per step longer than the others",
        evidence=(
            f"data wait per step: rank {slow.rank} {ms(slow.wait_per_step_s)}, the median rank "
            f"{ms(typical)} (step p50 {ms(step)})",
            "in synchronous data-parallel training every rank waits for the slowest at each "
            "gradient all-reduce",
        ),
        fix=(
            "give that rank's loader more workers or check its node (disk, CPU quota, noisy neighbours)",
            "balance the data: DistributedSampler with equal shard sizes, drop_last=True",
        ),
        # Every rank runs at the straggler's pace: that share of each step is lost.
        wants=tuple((b, frac) for b in STEP_BUCKETS + ("data_wait",)),
    )
