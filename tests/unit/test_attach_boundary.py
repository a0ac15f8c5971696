"""Only collect/, commands/ and store/ read run.json's ``attach`` record: the analysis, the rules
and the renderers read what the store made of it (``Session.sampled``), so no module past the
store tests how a run was collected."""

from __future__ import annotations

import ast
from pathlib import Path

import trainprof

PACKAGE = Path(trainprof.__file__).parent
# Where the record is written (collect/, commands/) and read (store/).
OWNERS = ("collect", "commands", "store")
# A key of the JSON report, not of run.json: `compare` reads two reports, never a run directory.
REPORT_READERS = {"compare/diff.py"}
KEY = "attach"


def _is_key(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == KEY


def uses_as_key(tree: ast.AST) -> list[int]:
    """Lines where ``"attach"`` is a mapping key: ``x["attach"]``, ``x.get("attach")`` (or pop,
    setdefault), ``"attach" in x``."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _is_key(node.slice):
            lines.append(node.lineno)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "pop", "setdefault")
            and node.args
            and _is_key(node.args[0])
        ):
            lines.append(node.lineno)
        elif (
            isinstance(node, ast.Compare)
            and _is_key(node.left)
            and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)
        ):
            lines.append(node.lineno)
    return lines


def test_the_finder_sees_each_way_of_reading_the_key() -> None:
    src = 'a = m["attach"]\nb = m.get("attach")\nc = "attach" in m\nd = m.get("x", "attach")\n'
    assert uses_as_key(ast.parse(src)) == [1, 2, 3]


def test_no_module_past_the_store_reads_the_attach_record() -> None:
    found = []
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 100, PACKAGE  # the whole package, not an empty folder
    for path in modules:
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.split("/")[0] in OWNERS or rel in REPORT_READERS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        found += [f"trainprof/{rel}:{line}" for line in uses_as_key(tree)]
    assert not found, (
        "these read run.json's attach record past the store: read Session.sampled "
        f"(store/sampled.py) or the Metrics built from it instead: {found}"
    )
