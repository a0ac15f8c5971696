"""Lines that keep what a call made past the call: where a steady memory growth is likeliest held.

A growth is measured per process, not per line: no allocation is traced. What can be read is
the code that ran while it grew. A function that runs every step and adds to a container that
outlives the call (``self.cache[key] = x``, ``self.history.append(out)``, a list passed in or
global) keeps what it adds; one that appends to a list it made itself does not, unless it is
the training loop's function and the list is made before its loop. Appends of a number
(``.item()``, ``float(...)``, ``len(...)``; not ``.tolist()``, a whole tensor's) keep a few
bytes a step and are left out: a float per step is no leak at the rates the rule judges.
Failing any such line, a sum kept across calls (``self.total += loss``, ``self.sum =
self.sum + val``) is the holder: a loss tensor summed so keeps every step's graph alive. Read with ``ast`` from the user's files.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from trainprof.analysis.attribution import named, short_name
from trainprof.analysis.source_lines import function_at, parsed
from trainprof.analysis.usercode import is_user_path
from trainprof.store.stacks import StackSpan

# Methods that add to a container in place.
_ADDS = frozenset(("append", "appendleft", "extend", "insert", "add", "setdefault"))
# Calls whose result is a number or a short string: a few bytes kept per step.
_SCALARS = frozenset(("item", "float", "int", "len", "round", "str", "bool"))


@dataclass(frozen=True)
class Holder:
    """A line that adds to a container outliving its function's call."""

    path: str
    line: int
    function: str  # as py-spy names it, e.g. ``RankingTracker.update``
    text: str  # the line's source, stripped
    adds: bool = True  # it adds to a container (else: a sum kept across calls, less likely)

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line} ({named(self.function)})"


def holders(path: str, function: str, line: int, loop: bool = False) -> list[Holder]:
    """The lines of the function ``function`` (py-spy's name) holding ``line`` in ``path`` that add
    to a container outliving the call, in source order; none where the file cannot be read.
    ``loop``: the function runs the training loop, so a container it binds before its loop and
    adds to inside it lives as long as the training does."""
    source = parsed(path)
    node = _function_at(path, function, line)
    if source is None or node is None:
        return []
    local = _local_names(node) - (_grown_in_loops(node) if loop else frozenset())
    found = []
    for at in _own_nodes(node):
        if not isinstance(at, ast.stmt):
            continue
        adds = _keeps(at, local)
        if adds or _sums(at, local):
            found.append(Holder(path, at.lineno, function, _statement(at, source[1]), adds))
    return sorted(found, key=lambda h: h.line)


def callees(path: str, function: str, line: int) -> list[tuple[str, str, int]]:
    """The functions defined in ``path`` that ``function`` calls by name (``tracker.update(...)``
    → every ``def update`` of the file), as (name, path, their first line)."""
    source = parsed(path)
    node = _function_at(path, function, line)
    if source is None or node is None:
        return []
    called = {
        f.attr if isinstance(f, ast.Attribute) else f.id
        for n in _own_nodes(node)
        if isinstance(n, ast.Call) and isinstance(f := n.func, (ast.Attribute, ast.Name))
    }
    return [(q, path, d.lineno) for q, d in _defs(source[0]) if d.name in called]


def _defs(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function of the module with its qualified name (``RankingTracker.update``)."""
    out = []
    stack: list[tuple[str, ast.AST]] = [("", tree)]
    while stack:
        prefix, node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((prefix + child.name, child))
                stack.append((f"{prefix}{child.name}.<locals>.", child))
            elif isinstance(child, ast.ClassDef):
                stack.append((f"{prefix}{child.name}.", child))
    return sorted(out, key=lambda qd: qd[1].lineno)


def likeliest(
    functions: Iterable[tuple[str, str, int]], drive: frozenset[tuple[str, str]] = frozenset()
) -> Holder | None:
    """The first holder in the first of ``functions`` ((name, path, a line inside)) that has one;
    else in the first of the functions they call, from their files, that has one. ``drive``:
    the training loop's functions, (name, path)."""
    seen = [f for f in functions if is_user_path(f[1])]
    found = [
        h for name, path, line in seen for h in holders(path, name, line, (name, path) in drive)
    ]
    found += [
        h
        for name, path, line in seen
        for callee in callees(path, name, line)
        for h in holders(callee[1], callee[0], callee[2])
    ]
    return next((h for h in found if h.adds), found[0] if found else None)


def _statement(node: ast.stmt, lines: tuple[str, ...], width: int = 80) -> str:
    """The statement's source on one line, cut at ``width`` characters."""
    end = node.end_lineno or node.lineno
    text = " ".join(lines[i].strip() for i in range(node.lineno - 1, min(end, len(lines))))
    return text if len(text) <= width else text[: width - 1] + "…"


def busiest_functions(
    spans: Iterable[StackSpan], window: tuple[float, float], drive: frozenset[tuple[str, str]]
) -> list[tuple[str, str, int]]:
    """The user's functions that ran in ``window``, by time, those that do not drive training
    (``drive``: the loop and its step helpers, which hold the step's own lists) first."""
    time: Counter[tuple[str, str]] = Counter()
    a_line: dict[tuple[str, str], int] = {}
    for s in spans:
        lo, hi = max(s.t0, window[0]), min(s.t1, window[1])
        if hi <= lo:
            continue
        for name, path, line in {(f[0], f[1], f[2]) for f in s.frames if is_user_path(f[1])}:
            time[(name, path)] += int((hi - lo) * 1e6)
            a_line.setdefault((name, path), line)
    ranked = sorted(time, key=lambda k: (k in drive, -time[k], k))
    return [(name, path, a_line[(name, path)]) for name, path in ranked]


def _function_at(path: str, function: str, line: int) -> ast.AST | None:
    """The function (py-spy's name) holding ``line``; a script's top level for ``<module>``."""
    name = short_name(named(function))
    source = parsed(path)
    if name == "<module>":
        return source[0] if source is not None else None
    return function_at(path, line, name)


def _own_nodes(func: ast.AST) -> Iterable[ast.AST]:
    """The function's nodes, not those of functions or classes defined inside it."""
    stack = list(ast.iter_child_nodes(func))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _grown_in_loops(func: ast.AST) -> frozenset[str]:
    """Names the function adds to (``.append``...) inside a ``for`` or ``while`` loop that does
    not bind them: containers that grow with every pass of the loop."""
    grown: set[str] = set()
    for loop in _own_nodes(func):
        if not isinstance(loop, (ast.For, ast.While)):
            continue
        body = [n for stmt in loop.body for n in ast.walk(stmt)]
        rebound = {n.id for n in body if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        for n in body:
            if isinstance(n, ast.Call) and isinstance(f := n.func, ast.Attribute):
                root = _root(f.value)
                if f.attr in _ADDS and isinstance(root, ast.Name) and root.id not in rebound:
                    grown.add(root.id)
    return frozenset(grown)


def _local_names(func: ast.AST) -> frozenset[str]:
    """Names bound in the function's body (assignments, loop and with targets), not its
    parameters: a list passed in outlives the call."""
    bound: set[str] = set()
    for node in _own_nodes(func):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
    if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        glob = {n for node in _own_nodes(func) if isinstance(node, ast.Global) for n in node.names}
        bound -= glob
    return frozenset(bound)


def _root(expr: ast.expr) -> ast.expr:
    while isinstance(expr, (ast.Attribute, ast.Subscript)):
        expr = expr.value
    return expr


def _outlives(container: ast.expr, local: frozenset[str]) -> bool:
    """An attribute (``self.cache``, ``tracker.scores``), or a name the function did not bind."""
    if isinstance(container, ast.Attribute):
        return True
    root = _root(container)
    return isinstance(root, ast.Name) and root.id not in local


def _small(value: ast.expr) -> bool:
    """A number or short string: a constant, ``x.item()``, ``float(x)``, or a literal of them."""
    if isinstance(value, ast.Constant):
        return True
    if isinstance(value, ast.Call):
        f = value.func
        called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        return called in _SCALARS
    if isinstance(value, (ast.Tuple, ast.List, ast.Set)):
        return all(_small(e) for e in value.elts)
    if isinstance(value, ast.Dict):
        return all(_small(v) for v in value.values)
    if isinstance(value, ast.JoinedStr):
        return True
    return False


def _sums(node: ast.AST, local: frozenset[str]) -> bool:
    """``self.total += x`` or ``self.sum = self.sum + x``: a sum kept across calls, of something
    that is not a number."""
    if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
        return _outlives(node.target, local) and not _small(node.value)
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target, value = node.targets[0], node.value
        if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add):
            again = ast.dump(target, include_attributes=False).replace("Store()", "Load()")
            sides = (value.left, value.right)
            return _outlives(target, local) and any(
                ast.dump(side, include_attributes=False) == again for side in sides
            )
    return False


def _keeps(node: ast.AST, local: frozenset[str]) -> bool:
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        call = node.value
        f = call.func
        if isinstance(f, ast.Attribute) and f.attr in _ADDS and _outlives(f.value, local):
            return not call.args or not all(_small(a) for a in call.args)
    if isinstance(node, ast.Assign):
        return any(
            isinstance(t, ast.Subscript) and _outlives(t.value, local) and not _small(node.value)
            for t in node.targets
        )
    return False
