"""Unfused optimizer: the optimizer updates one parameter tensor at a time (``foreach=False``),
launching a handful of kernels per tensor instead of a few for all of them.

Anti-pattern::

    torch.optim.AdamW(model.parameters(), lr=3e-4, foreach=False)

Best practice::

    torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)   # or leave foreach unset
"""

from __future__ import annotations

from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._structure import facts, worth_tuning
from trainprof.analysis.rules.registry import rule


@rule(
    id="unfused-optimizer",
    title="Unfused optimizer",
    family="gpu",
    severity="info",
    needs=("steps", "cuda"),
)
def check(m: Metrics) -> Finding | None:
    opt = facts(m).get("optimizer")
    if not isinstance(opt, dict) or opt.get("foreach") is not False or opt.get("fused"):
        return None
    if not worth_tuning(m):
        return None
    cls = opt.get("class") or "the optimizer"
    fused = f"{cls}(..., fused=True)" if opt.get("supports_fused") else f"{cls}(..., foreach=True)"
    return Finding(
        id="unfused-optimizer",
        severity="info",
        title=f"{cls} updates one parameter tensor at a time (foreach=False)",
        evidence=(f"{cls} was built with foreach=False and without fused=True, on CUDA",),
        fix=(f"{fused}: a few kernels for all parameters instead of several per tensor",),
    )
