"""A bug in trainprof's report (analysis or rendering) must not cost the user the job's exit
code, nor print trainprof's traceback: one line says so, the traceback is kept in the run
directory, and the job ran as without trainprof. The job here is real; the bug is injected."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from trainprof.collect import runner

pytestmark = pytest.mark.parallel  # judges no timing or load (CONTRIBUTING)


def test_a_failing_report_keeps_the_jobs_exit_code_and_says_how_to_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    def broken(*_args: Any, **_kwargs: Any) -> dict[str, Any]:
        raise ValueError("min() arg is an empty sequence")

    monkeypatch.setattr(runner, "report", broken)
    script = tmp_path / "job.py"
    script.write_text("import sys\nprint('trained')\nsys.exit(3)\n")
    run_dir = tmp_path / "run"
    opts = runner.RunOptions(
        command=[sys.executable, str(script)], run_dir=run_dir, quiet=True, stacks=False
    )
    assert runner.run(opts) == 3
    err = capfd.readouterr().err
    assert "Traceback" not in err
    line = next(x for x in err.splitlines() if x.startswith("trainprof: the report failed"))
    assert "(ValueError: min() arg is an empty sequence), a trainprof bug" in line
    assert f"`trainprof report {run_dir}` tries again" in line
    kept = (run_dir / runner.REPORT_ERROR).read_text()
    assert kept.startswith("Traceback") and "in broken" in kept
