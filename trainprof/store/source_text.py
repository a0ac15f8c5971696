"""The text of every source line that stack samples name, read once when a run is loaded."""

from __future__ import annotations

import linecache
from collections.abc import Iterable

from trainprof.store.stacks import StackSpan


def source_lines(spans: Iterable[StackSpan]) -> dict[tuple[str, int], str]:
    """The text of every line the stacks name, so rules can tell a print() from a matmul."""
    out: dict[tuple[str, int], str] = {}
    for span in spans:
        for _name, path, line in span.frames:
            key = (path, line)
            if key not in out:
                try:
                    out[key] = linecache.getline(path, line).strip()
                except ValueError:  # a torn path from a non-blocking sample ("embedded null byte")
                    out[key] = ""
    return out
