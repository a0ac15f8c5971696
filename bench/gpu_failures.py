"""A pytest plugin for ``bench.gpu_check`` (``-p bench.gpu_failures``): each failed test's report
goes to the file ``GPU_CHECK_FAILURES`` names the moment it fails. The check stops pytest at its
wall budget, and pytest prints its failures only at the end: the first H200 session's run was
stopped after 13 tests, two of them failed, and said nothing of why."""

from __future__ import annotations

import os
from typing import Any

KEEP_CHARS = 6000  # the end of a report: the assertion and the lines before it


def pytest_runtest_logreport(report: Any) -> None:
    path = os.environ.get("GPU_CHECK_FAILURES")
    if not path or not report.failed:
        return
    with open(path, "a") as f:
        f.write(f"=== FAILED {report.nodeid} ({report.when})\n")
        f.write(report.longreprtext[-KEEP_CHARS:] + "\n\n")
