"""The text of every source line that stack samples name, read once when a run is loaded."""

from __future__ import annotations

import linecache
import os
import stat
from collections.abc import Iterable

from trainprof.store.stacks import StackSpan


def source_lines(spans: Iterable[StackSpan]) -> dict[tuple[str, int], str]:
    """The text of every line the stacks name, so rules can tell a print() from a matmul."""
    out: dict[tuple[str, int], str] = {}
    readable_files: dict[str, bool] = {}
    for span in spans:
        for _name, path, line in span.frames:
            key = (path, line)
            if key not in out:
                try:
                    if path not in readable_files:
                        readable_files[path] = _source_file(path)
                    out[key] = linecache.getline(path, line).strip() if readable_files[path] else ""
                except ValueError:  # a torn path from a non-blocking sample ("embedded null byte")
                    out[key] = ""
    return out


MAX_SOURCE_BYTES = 16 * 1024 * 1024  # far beyond any script; a bigger "source" is not one


def _source_file(path: str) -> bool:
    """Whether the path a stack names is a regular file of a source's size: a stack file from
    elsewhere may name a FIFO (its open waits for ever) or /dev/zero (its read never ends)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size <= MAX_SOURCE_BYTES
