"""Take the probe out of a running interpreter: every patched attribute back, every hook removed.

The in-process API (a notebook's kernel) starts the probe in a process that goes on after the
profiled block; ``unload`` leaves that process as it was before ``start``. A wrapper the probe
installed is told by where its code lies (trainprof/probe/) and undone through ``__wrapped__``
(``functools.wraps``); the objects searched are the modules of the libraries the probe patches,
their classes, every optimizer class (the user's own too) and ``os``/``sys``.
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Iterator
from typing import Any

PROBE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
LIBRARIES = ("torch", "safetensors", "mlflow", "wandb")
_FUNCTIONS = (types.FunctionType, staticmethod, classmethod, types.MethodType)


def unload() -> list[str]:
    """Restore what the probe patched; the names of what could not be restored (none: clean)."""
    left: list[str] = []
    for owner in _owners():
        left.extend(_restore(owner))
    left.extend(_remove_global_hooks())
    _remove_import_hooks()
    return left


def is_probe(value: Any) -> bool:
    """Whether ``value`` is a function (or a method descriptor of one) the probe defined: its
    code lies in the probe's folder (``functools.wraps`` gives it the original's module name)."""
    if type(value) not in _FUNCTIONS:  # type(), not isinstance: no attribute of value is read
        return False
    code = getattr(getattr(value, "__func__", value), "__code__", None)
    return isinstance(code, types.CodeType) and code.co_filename.startswith(PROBE_DIR)


def _restore(owner: Any) -> list[str]:
    left: list[str] = []
    try:
        items = list(vars(owner).items())
    except TypeError:
        return left
    for name, value in items:
        if not is_probe(value):
            continue
        original = value
        while is_probe(original) and hasattr(
            getattr(original, "__func__", original), "__wrapped__"
        ):
            original = getattr(original, "__func__", original).__wrapped__
        if is_probe(original):
            left.append(f"{getattr(owner, '__name__', owner)}.{name}")
            continue
        try:
            setattr(owner, name, original)
        except (AttributeError, TypeError):
            left.append(f"{getattr(owner, '__name__', owner)}.{name}")
    return left


def _owners() -> Iterator[Any]:
    """The modules and classes a probe hook may sit on."""
    yield os
    yield sys
    seen: set[int] = set()
    for name, module in list(sys.modules.items()):
        if module is None or name.split(".")[0] not in LIBRARIES:
            continue
        yield module
        for value in list(vars(module).values()):
            if issubclass(type(value), type) and id(value) not in seen:
                if getattr(value, "__module__", "") == name:
                    seen.add(id(value))
                    yield value
    optim = sys.modules.get("torch.optim")
    if optim is not None:
        stack = [optim.Optimizer]
        while stack:
            cls = stack.pop()
            if id(cls) not in seen:
                seen.add(id(cls))
                yield cls
            stack.extend(cls.__subclasses__())
    for cls in _subclasses("torch.utils.data", "DataLoader"):
        if id(cls) not in seen:
            seen.add(id(cls))
            yield cls


def _subclasses(module: str, name: str) -> Iterator[type]:
    mod = sys.modules.get(module)
    base = getattr(mod, name, None) if mod is not None else None
    if not isinstance(base, type):
        return
    stack = [base]
    while stack:
        cls = stack.pop()
        yield cls
        stack.extend(cls.__subclasses__())


def _remove_global_hooks() -> list[str]:
    """The probe's entries in torch's global optimizer hook tables, removed."""
    left: list[str] = []
    optimizer = sys.modules.get("torch.optim.optimizer")
    if optimizer is None:
        return left
    for table in ("_global_optimizer_pre_hooks", "_global_optimizer_post_hooks"):
        hooks = getattr(optimizer, table, None)
        if not isinstance(hooks, dict):
            continue
        for key, hook in list(hooks.items()):
            if is_probe(hook):
                del hooks[key]
    return left


def _remove_import_hooks() -> None:
    from trainprof.probe.import_hook import _AfterImport

    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _AfterImport)]
