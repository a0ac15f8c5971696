"""Every command's start pays only for what it uses: the analysis, the rules, the gates and the
comparison are imported where used (import trainprof.cli: 0.24 → 0.12 s, for each of the ~400
trainprof processes of the suite and each of a user's runs)."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = (
    "trainprof.analysis.metrics",
    "trainprof.analysis.pipeline",
    "trainprof.analysis.rules",
    "trainprof.gate.gates",
    "trainprof.compare.diff",
)


def test_the_cli_loads_no_analysis_at_start() -> None:
    code = "import json, sys, trainprof.cli; print(json.dumps(sorted(sys.modules)))"
    loaded = set(json.loads(subprocess.check_output([sys.executable, "-c", code], text=True)))
    assert "trainprof.collect.runner" in loaded  # the check sees what the CLI imports
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
