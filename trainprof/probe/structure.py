"""One cheap pass over the model and the optimizer at the first optimizer step: the settings
that decide how well a GPU is used (Tensor-Core alignment, channels_last, a conv bias that batch
norm cancels, a single-tensor optimizer, cudnn autotuning), and the layers that act differently
in train() and eval() (dropout, batch norm). Facts only; the rules judge them.

The model is the module the job called ``train()`` on at the top level, else the one of the
training loop's modules that holds most of the stepped optimizer's parameters (``models.py``);
a job where neither is found gets no structure facts, and says so.
"""

from __future__ import annotations

from typing import Any

MAX_NAMES = 5  # module names quoted per finding
MIN_DIM = 64  # layers this small gain nothing from alignment (an RGB input, a 10-class head)


def _misaligned(dims: tuple[int, int]) -> bool:
    return min(dims) >= MIN_DIM and any(d % 8 for d in dims)


def facts(torch: Any, model: Any, optimizer: Any) -> dict[str, Any]:
    nn = torch.nn
    out: dict[str, Any] = {"model": type(model).__name__ if model is not None else None}
    defaults = getattr(optimizer, "defaults", {}) or {}
    out["optimizer"] = {
        "class": type(optimizer).__name__,
        "foreach": defaults.get("foreach"),
        "fused": defaults.get("fused"),
        "supports_fused": "fused" in defaults,
    }
    out["cudnn_benchmark"] = bool(torch.backends.cudnn.benchmark)
    if model is None:
        return out
    misaligned: list[list[Any]] = []
    bias_bn: list[str] = []
    mode_layers: set[str] = set()  # layers that compute differently in train() and eval()
    convs = channels_last = 0
    previous: tuple[str, Any] | None = None
    for name, mod in model.named_modules():
        if isinstance(mod, nn.Linear):
            dims = (mod.in_features, mod.out_features)
            if _misaligned(dims) and len(misaligned) < MAX_NAMES:
                misaligned.append([name or type(mod).__name__, *dims])
        elif isinstance(mod, (nn.Conv1d, nn.Conv2d, nn.Conv3d)):
            dims = (mod.in_channels, mod.out_channels)
            if isinstance(mod, nn.Conv2d):
                convs += 1
                w = mod.weight
                if w.dim() == 4 and w.is_contiguous(memory_format=torch.channels_last):
                    channels_last += 1
            if _misaligned(dims) and mod.groups == 1 and len(misaligned) < MAX_NAMES:
                misaligned.append([name or type(mod).__name__, *dims])
        elif isinstance(mod, nn.BatchNorm2d) and previous is not None:
            prev_name, prev = previous
            if isinstance(prev, nn.Conv2d) and prev.bias is not None and len(bias_bn) < MAX_NAMES:
                bias_bn.append(prev_name)
        if _acts_by_mode(nn, mod) and len(mode_layers) < MAX_NAMES:
            mode_layers.add(type(mod).__name__)
        if not list(mod.children()):
            previous = (name, mod)
    out.update(
        misaligned=misaligned,
        conv_bias_before_bn=bias_bn,
        conv2d=convs,
        conv2d_channels_last=channels_last,
        mode_layers=sorted(mode_layers),
    )
    return out


def _acts_by_mode(nn: Any, mod: Any) -> bool:
    """Dropout, batch norm, or a layer with a dropout of its own (attention, an RNN)."""
    if isinstance(mod, (nn.modules.dropout._DropoutNd, nn.modules.batchnorm._BatchNorm)):
        return True
    if isinstance(mod, nn.modules.instancenorm._InstanceNorm):
        return bool(mod.track_running_stats)
    return isinstance(mod, (nn.MultiheadAttention, nn.RNNBase)) and float(mod.dropout) > 0
