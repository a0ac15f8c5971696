"""The rules table: every module in this package (but the registry and helpers) is one rule,
registered when the package is imported. Adding a rule, or a crash signature, is adding a
module here."""

from __future__ import annotations

import importlib
import pkgutil

from trainprof.analysis.crash.row import Signature
from trainprof.analysis.rules.registry import REGISTRY, SIGNATURES, Rule, compounding

for _mod in pkgutil.iter_modules(__path__):
    if not _mod.name.startswith("_") and _mod.name != "registry":
        importlib.import_module(f"{__name__}.{_mod.name}")

# Pairs of rule ids whose causes compound → how (declared on one of the two rules).
COMPOUNDS = compounding(REGISTRY)


def all_rules() -> tuple[Rule, ...]:
    """Every registered rule, in a stable order (family, then id)."""
    order = ("input", "stalls", "host", "model", "memory", "gpu", "distributed", "crash", "hang")
    return tuple(sorted(REGISTRY.values(), key=lambda r: (order.index(r.family), r.id)))


def signatures() -> tuple[Signature, ...]:
    """Every crash signature, in the order the matcher tries them."""
    return tuple(sorted(SIGNATURES.values(), key=lambda s: s.order))


def example_of(script: str) -> str | None:
    """The id of the rule whose examples include zoo ``script`` (None: a healthy control)."""
    return next((r.id for r in all_rules() if script in r.examples), None)
