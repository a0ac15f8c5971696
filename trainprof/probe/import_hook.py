"""Run a callback right after a top-level module finishes importing (a post-import hook).

A finder sits first on ``sys.meta_path``; when the watched name is imported it takes itself
off, finds the real spec with the other finders, and wraps that spec's ``exec_module`` so the
callback runs once the module body has run. Nothing is imported on the watched module's behalf.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any


class _AfterImport:
    def __init__(self, name: str, callback: Callable[[ModuleType], None]) -> None:
        self.name = name
        self.callback = callback

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            return None
        spec = importlib.util.find_spec(fullname)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module
        callback = self.callback

        def exec_module(module: ModuleType) -> None:
            original(module)
            try:
                callback(module)
            except Exception:
                pass

        loader.exec_module = exec_module
        return spec


def call_after_import(name: str, callback: Callable[[ModuleType], None]) -> None:
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return
    sys.meta_path.insert(0, _AfterImport(name, callback))
