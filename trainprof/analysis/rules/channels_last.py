"""Channels-first convnet under mixed precision: Tensor-Core convolutions want NHWC
(``channels_last``); with NCHW tensors cuDNN transposes around every convolution.

Anti-pattern::

    model = ResNet50().cuda()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = model(images)

Best practice::

    model = ResNet50().cuda().to(memory_format=torch.channels_last)
    images = images.to("cuda", memory_format=torch.channels_last)
"""

from __future__ import annotations

from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._structure import facts, half_precision, worth_tuning
from trainprof.analysis.rules.registry import rule


@rule(
    id="channels-last",
    title="Channels-first convnet",
    family="gpu",
    severity="info",
    needs=("steps", "cuda"),
)
def check(m: Metrics) -> Finding | None:
    f = facts(m)
    convs, nhwc = f.get("conv2d"), f.get("conv2d_channels_last")
    if not isinstance(convs, int) or convs == 0 or nhwc != 0 or not half_precision(m):
        return None
    if not worth_tuning(m):
        return None
    return Finding(
        id="channels-last",
        severity="info",
        title=f"{convs} Conv2d layers run channels-first under fp16/bf16",
        evidence=(f"none of the {convs} Conv2d weights is in torch.channels_last memory format",),
        fix=(
            "model.to(memory_format=torch.channels_last) and the same for the input images: "
            "Tensor-Core convolutions run in NHWC without transposes",
        ),
    )
