"""The model's parameters that get a gradient but are in no optimizer, read once, at the first
optimizer step.

A layer replaced or added after ``optimizer = AdamW(model.parameters())`` is not in it: it gets
gradients every step and never changes (a new classification head that stays at its random
initialisation). A backbone left ``requires_grad=True`` while only the head is given to the
optimizer is the other case: backward computes, and keeps, gradients nobody uses.

Cost: one pass over the model's parameters and the optimizers' groups, comparing ids and
testing ``p.grad is not None`` (no tensor is read, nothing waits on a device); once a process.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

MAX_NAMES = 5  # parameter names quoted


def facts(model: Any, optimizers: Iterable[Any]) -> dict[str, Any]:
    """What of ``model`` got a gradient in this step and is in none of ``optimizers``."""
    optimizers = list(optimizers)
    optimized = {
        id(p)
        for opt in optimizers
        for group in getattr(opt, "param_groups", ())
        for p in group.get("params", ())
    }
    names: list[str] = []
    count = elements = total = params = 0
    for name, p in model.named_parameters():
        n = int(p.numel())
        params += 1
        total += n
        if p.requires_grad and p.grad is not None and id(p) not in optimized:
            count += 1
            elements += n
            if len(names) < MAX_NAMES:
                names.append(name)
    return {
        "count": count,
        "elements": elements,
        "params": params,
        "total": total,
        "names": names,
        "optimizers": len(optimizers),
    }
