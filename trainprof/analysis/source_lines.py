"""The user's source files read with ``ast``: the function that holds a given line, and its text."""

from __future__ import annotations

import ast
import functools

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


@functools.lru_cache(maxsize=64)
def parsed(path: str) -> tuple[ast.Module, tuple[str, ...]] | None:
    """The file's syntax tree and its lines; None where it cannot be read or parsed."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        return ast.parse(text), tuple(text.splitlines())
    except (OSError, SyntaxError, ValueError):
        return None


def _first(node: FunctionNode) -> int:
    """The code object's co_firstlineno: the first decorator's line, else the ``def``."""
    return min([node.lineno, *(d.lineno for d in node.decorator_list)])


def function_at(path: str, line: int, name: str) -> FunctionNode | None:
    """The innermost function ``name`` whose lines (its decorators included) hold ``line``."""
    found = parsed(path)
    best: FunctionNode | None = None
    for node in ast.walk(found[0]) if found is not None else ():
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            if _first(node) <= line <= (node.end_lineno or node.lineno):
                if best is None or _first(node) > _first(best):
                    best = node
    return best


def def_line(path: str, line: int, name: str) -> int:
    """The first line of the function ``name`` that holds ``line`` (its code object's
    co_firstlineno: the first decorator's line, else the ``def``); ``line`` if not found."""
    node = function_at(path, line, name)
    return _first(node) if node is not None else line
