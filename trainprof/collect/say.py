"""One line of trainprof's on stderr while the job runs, clear of the live status line."""

from __future__ import annotations

import sys

from trainprof.collect.live import LiveView


def say(live: LiveView | None, message: str) -> None:
    """One line of trainprof's on stderr while the job runs: the status line erased first, and
    on a line of its own when the job's output stopped mid-line."""
    lead = ""
    if live is not None:
        live.erase()
        if live.terminal is not None and not live.terminal.at_line_start:
            lead = "\n"
    print(f"{lead}{message}", file=sys.stderr, flush=True)
