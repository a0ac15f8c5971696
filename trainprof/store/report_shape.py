"""A stored report's shape checked before ``compare`` or ``ci --baseline`` read it.

Only the fields those readers use are checked, each against the JSON types the report contract
gives it; any other field may hold anything. The first field of another type is named in one
line (a ``ValueError``), so a damaged or hand-edited report never ends in a traceback.
"""

from __future__ import annotations

import math
from typing import Any

# A JSON type per name; "num" is an int or a finite float, never a bool.
_KINDS: dict[str, Any] = {
    "null": lambda v: v is None,
    "str": lambda v: isinstance(v, str),
    "bool": lambda v: isinstance(v, bool),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "num": lambda v: (
        isinstance(v, (int, float))
        and not isinstance(v, bool)
        and (not isinstance(v, float) or math.isfinite(v))
    ),
    "dict": lambda v: isinstance(v, dict),
    "list": lambda v: isinstance(v, list),
}

_NAMES = {
    "null": "null",
    "str": "a string",
    "bool": "a boolean",
    "int": "an integer",
    "num": "a number",
    "dict": "an object",
    "list": "a list",
}

_STR_LIST = ("list", "str")  # a list of strings
_FINDING = {
    "id": "str",
    "severity": "str",
    "title": "str|null",
    "where": "str|null",
    "evidence": _STR_LIST,
    "fix": _STR_LIST,
}
# field -> "kind|kind", a nested {field: ...} (an object or null), or (list, item shape)
SHAPE: dict[str, Any] = {
    "schema": "str",
    "run": {
        "command": ("list", "str|num|bool|null"),
        "exit_code": "int|null",
        "signal": "str|null",
        "wall_s": "num|null",
        "run_dir": "str|null",
        "stopped_by": "str|null",
        "pid": "int|null",
        "exception": {"type": "str|null", "message": "str|null"},
        "probe": {"loaded": "bool|null"},
        "attach": "dict|null",
    },
    "summary": {
        "steps": "int|null",
        "unit": "str|null",
        "warmup_steps_excluded": "int|null",
        "steps_per_s": "num|null",
        "samples_per_s": "num|null",
        "step_time_s": {"p50": "num|null", "p95": "num|null", "max": "num|null"},
        "data_wait_frac": "num|null",
        "peak_rss_bytes": "int|null",
        "gpu_util_mean": "num|null",
    },
    "settings": "dict|null",
    "findings": ("list", _FINDING),
    "skipped": "list|null",
    "ci": {"windows": ("list", "dict")},
}


def shape_error(data: dict[str, Any]) -> str | None:
    """The first field of ``data`` (a report) whose type its readers cannot take, said in a
    few words; None when every checked field is right."""
    return _check(data, SHAPE, "")


def _check(value: Any, shape: Any, at: str) -> str | None:
    if isinstance(shape, str):
        kinds = shape.split("|")
        if any(_KINDS[k](value) for k in kinds):
            return None
        wanted = " or ".join(_NAMES[k] for k in kinds)
        return f"{at or 'the report'} is {_kind(value)}, not {wanted}"
    if isinstance(shape, tuple):  # a list, or null, whose items each have shape[1]
        if value is None:
            return None
        if not isinstance(value, list):
            return f"{at} is {_kind(value)}, not a list"
        for i, item in enumerate(value):
            if (err := _check(item, shape[1], f"{at}[{i}]")) is not None:
                return err
        return None
    if value is None and at:
        return None
    if not isinstance(value, dict):
        return f"{at or 'the report'} is {_kind(value)}, not an object"
    for key, sub in shape.items():
        if key in value and (err := _check(value[key], sub, f"{at}.{key}" if at else key)):
            return err
    return None


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number" if not isinstance(value, float) or math.isfinite(value) else str(value)
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"
