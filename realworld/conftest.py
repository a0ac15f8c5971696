"""The corpus's pytest setup: upstream files are not collected; a summary of every case's runs."""

from __future__ import annotations

from typing import Any

import harness

# The upstream scripts and prepare.py are run by the harness, never imported by pytest.
collect_ignore_glob = ["cases/*"]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not harness.OUTCOMES:
        return
    terminalreporter.section("realworld cases")
    for o in harness.OUTCOMES:
        terminalreporter.write_line(harness.summary_line(o))
