"""Sizes, percentages and measured values, as the crash signatures read them from messages and
print them in evidence."""

from __future__ import annotations

import re

SIZE = r"\d+(?:\.\d+)? ?(?:bytes|[KMGT]i?B|B)"
_UNITS = {"B": 1, "bytes": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def to_bytes(size: str | None) -> float | None:
    if not size:
        return None
    m = re.match(r"(\d+(?:\.\d+)?) ?(bytes|([KMGT])i?B|B)$", size.strip())
    if not m:
        return None
    return float(m[1]) * _UNITS[m[3] or m[2]]


def fmt_bytes(n: float) -> str:
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.0f}%"


def measured_count(value: object) -> int | None:
    """A measured count or size; anything else (None, bool, negative, wrong type) is unmeasured."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def measured_text(value: object) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def cite(line: str) -> str:
    line = line.strip()
    return "stderr: " + (line if len(line) <= 300 else line[:299] + "…")
