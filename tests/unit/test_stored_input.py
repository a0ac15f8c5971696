"""Stored JSON read back safely: depth limited (store.rundir.loads) and the report's shape
checked before compare and ci --baseline read it (store.report_shape)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from trainprof.store.report_shape import shape_error
from trainprof.store.rundir import MAX_DEPTH, loads

GOOD: dict[str, Any] = {
    "schema": "trainprof.report/1",
    "run": {"command": ["python", "t.py"], "exit_code": 0, "exception": None, "probe": {}},
    "summary": {"steps": 10, "steps_per_s": 2.5, "step_time_s": {"p50": 0.1, "p95": None}},
    "findings": [{"id": "x", "severity": "warning", "title": "t", "evidence": [], "fix": []}],
    "ci": {"windows": [{"samples": 3}]},
    "extra": [[[{"anything": "goes"}]]],
}


def test_loads_refuses_deep_nesting_but_reads_strings_of_brackets() -> None:
    assert loads("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    with pytest.raises(ValueError, match="nested deeper"):
        loads("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    with pytest.raises(ValueError, match="nested deeper"):
        loads('{"a": ' + "[" * 10**6 + "]" * 10**6 + "}")
    text = json.dumps({"s": "[" * 10_000 + '\\"{'})  # brackets inside a string are text
    assert loads(text)["s"].startswith("[[")


def test_a_real_shape_has_no_error() -> None:
    assert shape_error(GOOD) is None
    assert shape_error({"schema": "trainprof.report/1"}) is None  # missing fields: unknown


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"summary": [1]}, "summary is a list, not an object"),
        ({"run": 5}, "run is a number, not an object"),
        ({"summary": {"steps": "10"}}, "summary.steps is a string, not an integer or null"),
        ({"summary": {"steps_per_s": float("nan")}}, "summary.steps_per_s is nan"),
        ({"summary": {"steps": True}}, "summary.steps is a boolean"),
        ({"run": {"command": "python t.py"}}, "run.command is a string, not a list"),
        ({"run": {"command": [["x"]]}}, "run.command[0] is a list"),
        ({"findings": [{"id": 1}]}, "findings[0].id is a number, not a string"),
        (
            {"findings": [{"id": "x", "severity": "e", "evidence": [{}]}]},
            "evidence[0] is an object",
        ),
        ({"ci": {"windows": [1]}}, "ci.windows[0] is a number, not an object"),
    ],
)
def test_a_wrongly_typed_field_is_named(change: dict[str, Any], said: str) -> None:
    error = shape_error({**GOOD, **change})
    assert error is not None and said in error, error
