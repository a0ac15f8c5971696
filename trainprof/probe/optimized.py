"""The job's models' parameters that get a gradient but are in no optimizer, read once, at the
first optimizer step.

A layer replaced or added after ``optimizer = AdamW(model.parameters())`` is not in it: it gets
gradients every step and never changes (a new classification head that stays at its random
initialisation). A backbone left ``requires_grad=True`` while only the head is given to the
optimizer is the other case: backward computes, and keeps, gradients nobody uses.

Cost: one pass over the models' parameters and the optimizers' groups, comparing ids and
testing ``p.grad is not None`` (no tensor is read, nothing waits on a device); once a process.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

MAX_NAMES = 5  # parameter names quoted


def facts(models: Iterable[tuple[str, Any]], optimizers: Iterable[Any]) -> dict[str, Any]:
    """What of the job's ``models`` (``[(name, module)]``, see ``models.py``) got a gradient in
    this step and is in none of ``optimizers``. Each parameter is named as the training loop
    reaches it (``model.head.weight``), once where modules share it; ``modules`` are the
    modules one level down that hold them (``model.head``), what to freeze where they should
    stay fixed."""
    optimizers = list(optimizers)
    optimized = {
        id(p)
        for opt in optimizers
        for group in getattr(opt, "param_groups", ())
        for p in group.get("params", ())
    }
    names: list[str] = []
    holders: list[str] = []
    labels: list[str] = []
    seen: set[int] = set()
    count = elements = total = params = 0
    for label, model in models:
        labels.append(label)
        for name, p in model.named_parameters():
            if id(p) in seen:
                continue
            seen.add(id(p))
            n = int(p.numel())
            params += 1
            total += n
            if p.requires_grad and p.grad is not None and id(p) not in optimized:
                count += 1
                elements += n
                if len(names) < MAX_NAMES:
                    names.append(f"{label}.{name}")
                holder = f"{label}.{name.split('.', 1)[0]}" if "." in name else label
                if holder not in holders:
                    holders.append(holder)
    return {
        "count": count,
        "elements": elements,
        "params": params,
        "total": total,
        "names": names,
        "modules": holders[:MAX_NAMES],
        "models": labels,
        "optimizers": len(optimizers),
    }
