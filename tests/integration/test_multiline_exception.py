"""A job that fails with a multi-line exception message: the console's row says its first line
and how many follow, never an escaped ``\\n``; report.json keeps the whole message."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_trainprof, write_script

pytestmark = pytest.mark.parallel  # judges no timing or load (CONTRIBUTING)

MESSAGE = "could not load the config:\n  key 'lr' is missing\n  key 'epochs' is missing"


def test_a_multi_line_message_shows_its_first_line_and_the_count_of_the_rest(
    tmp_path: Path,
) -> None:
    # the message in a variable: the finding quotes the raising line, which holds no \n then
    script = write_script(
        tmp_path, "job.py", f"message = {MESSAGE!r}\nraise RuntimeError(message)\n"
    )
    r = run_trainprof(tmp_path, "--no-stacks", str(script))
    assert r.returncode == 1, r.stderr[-2000:]
    # the report's panel, after the job's own traceback (which prints the message as it is)
    panel = r.stderr[r.stderr.index("trainprof report") :]
    assert "\\n" not in panel, panel
    row = next(line for line in panel.splitlines() if "failed" in line)
    assert "before training: RuntimeError: could not load the config:" in row, panel
    words = " ".join(panel.replace("│", " ").split())
    assert "could not load the config: (and 2 more lines in the job's stderr)" in words, panel
    assert r.report is not None and r.report["run"]["exception"]["message"] == MESSAGE
