"""py-spy's chunks keep the full (or a lowered) rate for the first FAST_CHUNKS chunks' time, by
the clock: chunks started to lower the rate (py-spy cost too much) do not end that time early.
Real py-spy runs on a real sleeping process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from trainprof.collect.samplers.stacks import DEFAULT_RATE_HZ, LONG_RUN_RATE_HZ, StackRecorder


def test_chunks_started_for_a_lower_rate_keep_it_in_the_first_minutes(tmp_path: Path) -> None:
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    rec = StackRecorder(target.pid, tmp_path)
    try:
        assert rec.start(), rec.error
        for lowered in (34, 30, 27):  # as _keep_within_budget does, three times in a row
            previous = rec.proc
            rec.rate_hz = lowered
            assert rec.start(), rec.error
            assert previous is not None
            previous.terminate()
            previous.wait()
    finally:
        rec.stop(timeout=10)
        target.kill()
        target.wait()
    # not LONG_RUN_RATE_HZ from the third chunk on, as when chunks were counted
    assert [p.rate_hz for p in rec.pieces] == [DEFAULT_RATE_HZ, 34, 30, 27]
    assert LONG_RUN_RATE_HZ not in (34, 30, 27)
