"""cudnn autotuning off: a convnet runs cuDNN's default convolution algorithms instead of the
fastest for its shapes.

Anti-pattern::

    model = ResNet50().cuda()             # torch.backends.cudnn.benchmark is False by default

Best practice::

    torch.backends.cudnn.benchmark = True  # when input shapes stay the same from step to step
"""

from __future__ import annotations

from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._structure import facts, worth_tuning
from trainprof.analysis.rules.registry import rule


@rule(
    id="cudnn-benchmark-off",
    title="cudnn autotuning off",
    family="gpu",
    severity="info",
    needs=("steps", "cuda"),
)
def check(m: Metrics) -> Finding | None:
    f = facts(m)
    convs = f.get("conv2d")
    if not isinstance(convs, int) or convs == 0 or f.get("cudnn_benchmark") is not False:
        return None
    if not worth_tuning(m):
        return None
    return Finding(
        id="cudnn-benchmark-off",
        severity="info",
        title=f"cuDNN autotuning is off for a model with {convs} Conv2d layers",
        evidence=("torch.backends.cudnn.benchmark was False at the first optimizer step",),
        fix=(
            "torch.backends.cudnn.benchmark = True when input shapes are fixed (the first "
            "steps then try the algorithms; later ones use the fastest)",
        ),
    )
