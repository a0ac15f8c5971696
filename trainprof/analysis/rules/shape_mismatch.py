"""A tensor shape does not match what the code expects.

Tensor shapes that do not fit the layer, loss or view that the code applies to them.

Anti-pattern::

    torch.cat([labels, extra], dim=2)  # labels are 2-D

Best practice::

    assert labels.dim() == 3, labels.shape  # check shapes where they are built
"""

from __future__ import annotations

import re

from trainprof.analysis.crash.common import (
    blocks_up,
    code_where,
    in_worker,
    innermost_user,
    make_finding,
)
from trainprof.analysis.crash.row import Built, Hit, Scan
from trainprof.analysis.crash.traceback import Doc
from trainprof.analysis.crash.units import cite, measured_text
from trainprof.analysis.rules.registry import signature


def _shape_accept(doc: Doc, hit: Hit) -> bool:
    if hit.block is None:
        return True
    if hit.block.wrapped:
        return True
    return innermost_user(blocks_up(doc, hit.block)) is not None


def _shape_explain(hit: Hit) -> tuple[list[str], list[str]]:
    m, p = hit.match, hit.pattern
    if p == 0:
        hi = int(m[2])
        return (
            [
                f"a tensor with {hi + 1} dimensions was asked for dimension {m[3]} "
                f"(valid: {m[1]}..{hi}): the data has one dimension fewer or more than the code "
                "assumes (often the batch or channel dimension)"
            ],
            ["Check `x.dim()` of the batch; add a missing dimension with `unsqueeze`"],
        )
    if p in (1, 2):
        rows, features, want, out = m[1], m[2], m[3], m[4]
        return (
            [
                f"the input has {features} features per row (batch of {rows}) but the layer "
                f"expects {want} (weight {want}x{out})"
            ],
            [
                f"Build the layer for the data: `nn.Linear({features}, {out})`, or "
                "`nn.LazyLinear` after a flatten; or reshape the input to the layer's size"
            ],
        )
    if p == 3:
        return (
            [f"{m[3]} needs {m[1]}D (unbatched) or {m[2]}D (batched) input, got [{m[4]}]"],
            [
                "Reshape the batch to [N, C, ...]: e.g. `x.view(-1, 1, 28, 28)` for flattened "
                "images, or `x.unsqueeze(1)` to add a channel dimension"
            ],
        )
    if p == 4:
        return (
            [f"{m[2]}D weight [{m[3]}] needs {m[1]}D input, got {m[4]}D input [{m[5]}]"],
            ["Reshape the batch to [N, C, H, W] before the convolution"],
        )
    if p == 5:
        return (
            [f"the layer expects {m[4]} input channels but the batch has {m[5]} (input [{m[3]}])"],
            [
                f"Build the first layer with `in_channels={m[5]}`, or convert the images "
                '(`img.convert("RGB")` / `x.expand(-1, 3, -1, -1)`)'
            ],
        )
    if p == 6:
        return (
            [f"two tensors differ in dimension {m[3]}: {m[1]} vs {m[2]} (e.g. output vs target)"],
            ["Compare the output and target shapes; make the output width match the target"],
        )
    if p == 7:
        return (
            [
                f"the model output has {m[1]} rows but the target has {m[2]}: a view/reshape "
                "folded another dimension into the batch"
            ],
            ["Keep the batch dimension first and explicit: `logits.view(x.size(0), -1)`"],
        )
    if p == 8:
        return (
            [
                f"view/reshape to [{m[1]}] cannot hold {m[2]} elements: often a hard-coded batch "
                "size meeting the last, smaller batch"
            ],
            [
                "Use -1 for the batch dimension: `x.view(x.size(0), -1)`; or "
                "`DataLoader(..., drop_last=True)`"
            ],
        )
    if p == 9:
        return (
            [
                f"BatchNorm got a batch of 1 sample in training mode (input [{m[1]}]): usually "
                "the last, incomplete batch (the dataset size is not a multiple of batch_size)"
            ],
            ["`DataLoader(..., drop_last=True)` for training"],
        )
    if p == 10:
        return (
            [f"BatchNorm was built for {m[1]} features but got {m[2]}"],
            ["Match `BatchNorm(num_features)` to the channels of its input"],
        )
    if p == 14:
        return (
            [
                f"permute got {m[2]} dimensions for a tensor that has {m[1]}: the data has a "
                "different number of dimensions than the code assumes"
            ],
            ["Check `x.dim()` where the tensor is made; add a missing dimension with `unsqueeze`"],
        )
    if p == 13:
        return (
            [f"the loss expected a target of size {m[1]} but got {m[2]}"],
            ["Make the target's shape match the output's"],
        )
    return (
        ["tensors of different sizes were concatenated or stacked in the training code"],
        ["Print the shapes of the tensors being joined"],
    )


NEEDLES = (
    "Dimension out of range",
    "cannot be multiplied",
    "size mismatch, m1",
    "Expected ",
    "Given groups",
    "must match the size of tensor",
    "is invalid for input of size",
    "running_mean should contain",
    "Sizes of tensors must match",
    "stack expects each",
    "is not equal to len(dims)",
)
PATTERNS = tuple(
    re.compile(p)
    for p in (
        r"Dimension out of range \(expected to be in range of \[(-?\d+), (-?\d+)\], "
        r"but got (-?\d+)\)",
        r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)",
        r"size mismatch, m1: \[(\d+) x (\d+)\], m2: \[(\d+) x (\d+)\]",
        r"Expected (\d+)D \(unbatched\) or (\d+)D \(batched\) input to (\w+), "
        r"but got input of size: \[([^\]]*)\]",
        r"Expected (\d+)-dimensional input for (\d+)-dimensional weight \[([^\]]*)\], "
        r"but got (\d+)-dimensional input of size \[([^\]]*)\] instead",
        r"Given groups=(\d+), weight of size \[([^\]]*)\], expected input\[([^\]]*)\] "
        r"to have (\d+) channels, but got (\d+) channels instead",
        r"The size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) "
        r"at non-singleton dimension (\d+)",
        r"Expected input batch_size \((\d+)\) to match target batch_size \((\d+)\)",
        r"shape '\[([^\]]*)\]' is invalid for input of size (\d+)",
        r"Expected more than 1 value per channel when training, got input size "
        r"(?:torch\.Size\()?\[([^\]]*)\]",
        r"running_mean should contain (\d+) elements not (\d+)",
        r"Sizes of tensors must match except in dimension (\d+)",
        r"stack expects each tensor to be equal size",
        r"Expected target size (\[[^\]]*\]|\([^)]*\)), got (\[[^\]]*\]|\([^)]*\))",
        r"input\.dim\(\) = (\d+) is not equal to len\(dims\) = (\d+)",
    )
)


@signature(
    id="shape-mismatch",
    examples=("crash_shape",),
    title="A tensor shape does not match what the code expects",
    order=30,
    needles=NEEDLES,
    patterns=PATTERNS,
)
def build(scan: Scan) -> Built | None:
    hits = [hit for hit in scan.hits if _shape_accept(scan.doc, hit)]
    if not hits:
        return None
    hit = hits[-1]
    frame = code_where(scan.doc, hit)
    evidence = [cite(hit.text)]
    explained, fix = _shape_explain(hit)
    evidence.extend(explained)
    worker = in_worker(hit)
    if worker:
        evidence.append(f"raised in {worker}: in the Dataset or its transforms")
    inner = hit.block.frames[-1] if hit.block is not None and hit.block.frames else None
    if frame is not None and frame.code:
        evidence.append(f"at {frame.where}: {frame.code}")
    elif inner is not None and inner.code and inner.is_user:
        evidence.append(f"at {inner.where}: {inner.code}")
    shapes = measured_text(scan.ctx.last_batch_shapes)
    if shapes:
        evidence.append(f"last batch seen: {shapes}")
    if frame is not None:
        fix.append(f"Print the shapes just before {frame.where} (`print(x.shape)`) for one batch")
    return (
        make_finding(
            "shape-mismatch",
            "error",
            "Tensor shapes do not match what the code expects",
            evidence,
            fix,
            frame.where if frame else None,
        ),
        (hit,),
    )
