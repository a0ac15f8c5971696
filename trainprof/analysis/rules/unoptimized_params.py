"""Unoptimized parameters: parameters of the model get gradients at every step, but no
optimizer holds them.

Two ways to get there, one fix each. A layer replaced or added after the optimizer was built
(a new classification head for another number of classes) is not in the optimizer: it gets
gradients and never changes, so the model trains around a layer frozen at its random
initialisation, and nothing crashes. A backbone meant to stay fixed, with only the head given
to the optimizer but its parameters left ``requires_grad=True``: backward computes their weight
gradients every step and keeps them in memory, for nothing. The probe compares, once at the
first optimizer step, the model's parameters that have a gradient with every optimizer built.

Anti-pattern::

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    model.fc = nn.Linear(model.fc.in_features, 10)     # not in the optimizer: never trained
    optimizer = torch.optim.AdamW(model.fc.parameters())  # backbone: gradients for nothing

Best practice::

    model.fc = nn.Linear(model.fc.in_features, 10)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)   # after the model is final
    model.backbone.requires_grad_(False)                         # fixed: no gradients at all
"""

from __future__ import annotations

from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules.registry import rule
from trainprof.units import plural


@rule(
    id="unoptimized-params",
    title="Parameters no optimizer updates",
    family="model",
    needs=("model",),
)
def check(m: Metrics) -> Finding | None:
    facts = m.activity.unoptimized or {}
    count, elements = _int(facts.get("count")), _int(facts.get("elements"))
    params, total = _int(facts.get("params")), _int(facts.get("total"))
    if count <= 0 or elements <= 0:
        return None
    share = elements / total if total > 0 else None
    of_weights = f"{share:.0%} of its weights" if share is not None else "weights not counted"
    names = [str(n) for n in facts.get("names") or []]
    quoted = ", ".join(names) + (f" and {count - len(names)} more" if count > len(names) else "")
    optimizers = _int(facts.get("optimizers"))
    return Finding(
        id="unoptimized-params",
        severity="warning",
        title=(
            f"{plural(count, 'parameter')} of the model {'gets' if count == 1 else 'get'} "
            f"gradients that no optimizer uses ({of_weights})"
        ),
        evidence=(
            f"at the first optimizer step, {count} of the model's {params} parameters "
            f"({_elements(elements)} of {_elements(total)} weights) had a gradient and were in "
            f"no optimizer ({plural(optimizers, 'optimizer')} built): {quoted}",
            "they never change: if they should train, the model trains around them at their "
            "initial values; if they should stay fixed, backward still computes and keeps their "
            "gradients",
        ),
        fix=(
            "if they should train: build the optimizer after the model is final (a layer "
            "replaced or added after `optimizer = ...(model.parameters())` is not in it), or "
            "add them with optimizer.add_param_group({'params': ...})",
            f"if they should stay fixed: {_freeze(names)} so backward skips their weight "
            "gradients and keeps no memory for them",
        ),
    )


def _freeze(names: list[str]) -> str:
    """``requires_grad_(False)`` on them: on their top-level module where they share one."""
    tops = {n.split(".", 1)[0] for n in names if "." in n}
    if len(tops) == 1 and all("." in n for n in names):
        return f"model.{tops.pop()}.requires_grad_(False) (where all of it stays fixed)"
    return "p.requires_grad_(False) on each of them"


def _elements(n: int) -> str:
    if n >= 1e9:
        return f"{n / 1e9:.1f} G"
    if n >= 1e6:
        return f"{n / 1e6:.1f} M"
    if n >= 1e3:
        return f"{n / 1e3:.1f} k"
    return str(n)


def _int(v: object) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0
