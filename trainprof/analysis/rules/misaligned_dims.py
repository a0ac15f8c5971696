"""Misaligned dimensions: Linear or Conv layers whose sizes are not multiples of 8 under
fp16/bf16, so Tensor Cores run with padding or not at all.

Anti-pattern::

    nn.Linear(768, 50257)        # a vocabulary of 50257: not a multiple of 8

Best practice::

    nn.Linear(768, 50304)        # pad the vocabulary (or hidden sizes) to a multiple of 64
"""

from __future__ import annotations

from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._structure import facts, half_precision, worth_tuning
from trainprof.analysis.rules.registry import rule


@rule(
    id="misaligned-dims",
    title="Misaligned dimensions",
    family="gpu",
    severity="info",
    needs=("steps", "cuda"),
)
def check(m: Metrics) -> Finding | None:
    rows = [r for r in facts(m).get("misaligned") or [] if isinstance(r, list) and len(r) == 3]
    if not rows or not half_precision(m) or not worth_tuning(m):
        return None
    shown = ", ".join(f"{r[0]} ({r[1]}→{r[2]})" for r in rows)
    return Finding(
        id="misaligned-dims",
        severity="info",
        title=f"{len(rows)} layer sizes are not multiples of 8 under fp16/bf16",
        evidence=(f"in → out sizes not divisible by 8: {shown}",),
        fix=(
            "pad sizes to multiples of 8 (64 is better for a vocabulary or hidden size): "
            "Tensor Cores need aligned matrix dimensions",
        ),
    )
