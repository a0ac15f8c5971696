"""Import an optional extra's module, or say in one line which extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from trainprof.errors import TrainprofError


def need(module: str, extra: str, option: str) -> ModuleType:
    """The module, imported; a TrainprofError naming the extra to install when it is missing."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise TrainprofError(
            f"{option} needs the `{extra}` extra ({exc.name or module} is not installed): "
            f"pip install 'trainprof[{extra}]'"
        ) from None
