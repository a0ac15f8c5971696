"""Standard descriptors trainprof was started without: held on /dev/null, and closed again for
the job, so that it gets what it would have had without trainprof.

A process started with fd 0, 1 or 2 closed (``trainprof run train.py 1>&-``) would hand that
number to the first file or pipe it opens: the job's output pipe would become trainprof's own
stdout. ``reserve()`` runs first thing in the entry point and fills each closed one with
/dev/null; ``CLOSED`` names them for the launcher."""

from __future__ import annotations

import io
import os
import sys

STANDARD = (0, 1, 2)
CLOSED: frozenset[int] = frozenset()  # the standard descriptors closed when trainprof started


def reserve() -> frozenset[int]:
    """Open /dev/null on each closed standard descriptor; the ones that were closed."""
    global CLOSED
    closed = []
    for fd in STANDARD:
        try:
            os.fstat(fd)
        except OSError:
            closed.append(fd)
    for fd in closed:
        null = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
        if null != fd:  # the lowest free number is fd itself unless a lower one was also closed
            os.dup2(null, fd)
            os.close(null)
    for fd, name in ((1, "stdout"), (2, "stderr")):
        if fd in closed and getattr(sys, name) is None:  # Python leaves a closed one as None
            setattr(sys, name, io.TextIOWrapper(io.FileIO(fd, "w", closefd=False)))
    if 0 in closed and sys.stdin is None:
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    CLOSED = frozenset(closed)
    return CLOSED


def close_in_child() -> None:
    """In the job's process, before its exec: close what was closed when trainprof started."""
    for fd in CLOSED:
        os.close(fd)
