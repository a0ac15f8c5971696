"""What stopped a run that a signal stopped, in the report's words."""

from __future__ import annotations

from typing import Any


def stop_signal_words(meta: dict[str, Any]) -> str:
    """``Ctrl-C`` for SIGINT (or a run that did not record its signal), else its name:
    ``SIGTERM`` (a kill, a scheduler's stop), ``SIGHUP`` (the terminal closed)."""
    name = meta.get("stop_signal")
    return "Ctrl-C" if name in (None, "SIGINT") else str(name)
