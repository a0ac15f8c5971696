"""Run callbacks once, right after a module finishes importing (a post-import hook).

A finder sits first on ``sys.meta_path``. Each lookup of the watched name (an import, or a
library's ``importlib.util.find_spec`` probe whose spec is thrown away) asks the other finders
for the real spec and wraps its loader's ``exec_module``; the finder stays until a wrapped
loader has run the module body, then calls back and takes itself off. Nothing is imported on
the watched module's behalf.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any


class _AfterImport:
    def __init__(self, name: str, callback: Callable[[ModuleType], None]) -> None:
        self.name = name
        self.callbacks = [callback]
        self.done = False

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.name or self.done:
            return None
        spec = None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is self or isinstance(finder, _AfterImport) or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            original(module)
            if self.done:
                return
            self.done = True
            try:
                sys.meta_path.remove(self)
            except ValueError:
                pass
            for callback in self.callbacks:
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
    for finder in sys.meta_path:
        if isinstance(finder, _AfterImport) and finder.name == name and not finder.done:
            finder.callbacks.append(callback)
            return
    sys.meta_path.insert(0, _AfterImport(name, callback))
