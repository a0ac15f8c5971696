"""Conv bias before batch norm: a Conv2d with a bias followed by BatchNorm2d computes and stores
a bias that the normalisation subtracts again.

Anti-pattern::

    nn.Sequential(nn.Conv2d(64, 128, 3), nn.BatchNorm2d(128))

Best practice::

    nn.Sequential(nn.Conv2d(64, 128, 3, bias=False), nn.BatchNorm2d(128))
"""

from __future__ import annotations

from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._structure import facts, names, worth_tuning
from trainprof.analysis.rules.registry import rule


@rule(
    id="conv-bias-before-bn",
    title="Conv bias before batch norm",
    family="gpu",
    severity="info",
    needs=("steps", "cuda"),
)
def check(m: Metrics) -> Finding | None:
    found = names(facts(m).get("conv_bias_before_bn"))
    if not found or not worth_tuning(m):
        return None
    return Finding(
        id="conv-bias-before-bn",
        severity="info",
        title=f"{len(found)} Conv2d layers have a bias that the next BatchNorm2d cancels",
        evidence=(f"Conv2d with bias=True followed by BatchNorm2d: {', '.join(found)}",),
        fix=("nn.Conv2d(..., bias=False) before a BatchNorm2d: one add and its gradient less",),
    )
