"""Sizes as ``--max-peak-rss`` takes them: ``8GB``, ``8GiB``, ``512M``, ``1.5g`` or bytes."""

from __future__ import annotations

import re

_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([kmgt]?)(i?)b?\s*$", re.IGNORECASE)
_POWER = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}


def parse_size(text: str) -> int | None:
    """``8GB`` (10^9), ``8GiB`` (2^30), ``512M``, ``1.5g``, ``1000000`` (bytes); None if not a size."""
    m = _SIZE.match(text)
    if not m:
        return None
    number, unit, binary = float(m.group(1)), m.group(2).lower(), bool(m.group(3))
    if binary and not unit:
        return None
    return int(number * (1024 if binary else 1000) ** _POWER[unit])
