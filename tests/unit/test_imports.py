"""trainprof's modules import in one direction: no cycle among them (imports inside functions
count, ``TYPE_CHECKING``-only ones do not), and nothing that analyses, loads or renders a run
imports what collects one or the commands."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import trainprof

PACKAGE = Path(trainprof.__file__).resolve().parent
# What collects a run (launches or attaches, samples, writes the run directory) and the CLI.
COLLECT = ("trainprof.cli", "trainprof.collect", "trainprof.commands")
# What reads a run directory, judges it and writes reports.
JUDGE = ("trainprof.analysis", "trainprof.render", "trainprof.store")


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if "examples" in parts:  # the zoo: user scripts, not trainprof's code
            continue
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _type_checking_only(tree: ast.Module) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    return skip


def imported(path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The trainprof modules ``path`` imports, at any depth of its code."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_only(tree)

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            target = resolve(name) if name.startswith("trainprof") else None
            if target is not None:
                yield target


def graph() -> dict[str, set[str]]:
    known = modules()
    return {m: set(imported(p, known)) - {m} for m, p in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def _under(module: str, roots: tuple[str, ...]) -> bool:
    return any(module == r or module.startswith(r + ".") for r in roots)


def test_no_import_cycle() -> None:
    edges = graph()
    assert cycles(edges) == [], "import cycles: " + "; ".join(
        ", ".join(f"{m} -> {sorted(edges[m] & set(c))}" for m in c) for c in cycles(edges)
    )


def test_nothing_that_judges_a_run_imports_what_collects_it() -> None:
    edges = graph()
    wrong = sorted(
        f"{m} imports {t}"
        for m, targets in edges.items()
        if _under(m, JUDGE)
        for t in targets
        if _under(t, COLLECT)
    )
    assert wrong == []


def test_the_walk_sees_lazy_imports_and_cycles() -> None:
    """The checks above can fail: a lazy import is an edge, and a loop of edges is a cycle."""
    edges = graph()
    assert "trainprof.analysis.from_stacks" in edges["trainprof.analysis.measure"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
