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
    examples=("head_not_optimized",),
    title="Parameters no optimizer updates",
    family="model",
    harm="results",
    needs=("model",),
)
def check(m: Metrics) -> Finding | None:
    facts = m.activity.unoptimized or {}
    count, elements = _int(facts.get("count")), _int(facts.get("elements"))
    params, total = _int(facts.get("params")), _int(facts.get("total"))
    if count <= 0 or elements <= 0:
        return None
    share = elements / total if total > 0 else None
    of_weights = f"{share:.0%} of the weights" if share is not None else "weights not counted"
    names = [str(n) for n in facts.get("names") or []]
    quoted = ", ".join(names) + (f" and {count - len(names)} more" if count > len(names) else "")
    holders = [str(h) for h in facts.get("modules") or []]
    models = [str(n) for n in facts.get("models") or []]
    optimizers = _int(facts.get("optimizers"))
    return Finding(
        id="unoptimized-params",
        severity="warning",
        title=(
            f"{plural(count, 'parameter')} {'gets' if count == 1 else 'get'} gradients that no "
            f"optimizer uses: {_joined(holders) or 'in the model'} ({of_weights})"
        ),
        evidence=(
            f"at the first optimizer step, {count} of the {params} parameters of "
            f"{_joined(models) or 'the model'} ({_elements(elements)} of {_elements(total)} "
            f"weights) had a gradient and were in no optimizer "
            f"({plural(optimizers, 'optimizer')} built): {quoted}",
            "they never change: if they should train, the model trains around them at their "
            "initial values; if they should stay fixed, backward still computes and keeps their "
            "gradients",
        ),
        fix=(
            f"if they should train: {_add(holders, facts.get('optimizer_name'))}, or build the "
            "optimizer after the model is final (a layer replaced or added after `optimizer = "
            "...(model.parameters())` is not in it)",
            f"if they should stay fixed: {_freeze(holders)} so backward skips their weight "
            "gradients and keeps no memory for them",
        ),
    )


def _joined(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``; empty for none."""
    return " and ".join(names) if len(names) < 3 else ", ".join(names[:-1]) + f" and {names[-1]}"


def _add(holders: list[str], optimizer: object) -> str:
    """The optimizer (by the loop's name for it) given the modules that hold them, where few
    enough to name."""
    if len(holders) == 1:
        params = f"{holders[0]}.parameters()"
    elif len(holders) == 2:
        params = f"[*{holders[0]}.parameters(), *{holders[1]}.parameters()]"
    else:
        params = "..."
    name = optimizer if isinstance(optimizer, str) and optimizer else "optimizer"
    return f"{name}.add_param_group({{'params': {params}}})"


def _freeze(holders: list[str]) -> str:
    """``requires_grad_(False)`` on the modules that hold them (each a model's direct child,
    or the model itself where they are its own), where few enough to name."""
    if 1 <= len(holders) <= 2:
        return " and ".join(f"{h}.requires_grad_(False)" for h in holders) + (
            " (where all of it stays fixed)"
        )
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
