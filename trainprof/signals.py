"""Catching the signals a user stops trainprof with, but never one the environment ignores.

A shell runs a background command of a script (``trainprof run train.py &``) and ``nohup``
runs its command with SIGINT (or SIGHUP) ignored, and the job trainprof starts inherits that:
without trainprof it would go on through a Ctrl-C. trainprof keeps it so: a handler of its own
for such a signal would pass the first on to a job that ignores it and SIGKILL the job at the
second."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterable
from typing import Any

Handler = Callable[[int, Any], None]


def catch(signals: Iterable[int], handler: Handler) -> dict[int, Any]:
    """Install ``handler`` for each signal that is not ignored now; the handlers it replaced."""
    previous: dict[int, Any] = {}
    for s in signals:
        if signal.getsignal(s) is not signal.SIG_IGN:
            previous[s] = signal.signal(s, handler)
    return previous


def restore(previous: dict[int, Any]) -> None:
    for s, handler in previous.items():
        signal.signal(s, handler)
