"""The first line of the function that holds a given line of a source file, read with ``ast``."""

from __future__ import annotations

import ast
import functools


@functools.lru_cache(maxsize=64)
def _tree(path: str) -> ast.Module | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return None


def def_line(path: str, line: int, name: str) -> int:
    """The first line of the function ``name`` that holds ``line`` (its code object's
    co_firstlineno: the first decorator's line, else the ``def``); ``line`` if not found."""
    tree = _tree(path)
    best: int | None = None
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            end = node.end_lineno or node.lineno
            if node.lineno <= line <= end:
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                best = first if best is None else max(best, first)
    return best if best is not None else line
