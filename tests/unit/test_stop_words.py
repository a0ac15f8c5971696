"""A report names what stopped the job: the signal that came, or the recording that stopped."""

from __future__ import annotations

from trainprof.analysis.stop import stop_signal_words
from trainprof.render.quiet_note import unclean_note

FULL_DISK = {"stopped_at_s": 1.5, "reason": "No space left on device", "file": "stdout.log"}


def test_a_sigterm_is_named_not_called_a_ctrl_c() -> None:
    """Was: "recorded before Ctrl-C stopped the job" after a SIGTERM."""
    meta = {"exit_code": 143, "stopped_by": "interrupt", "stop_signal": "SIGTERM"}
    note = unclean_note(meta)
    assert "before SIGTERM stopped the job" in note and "Ctrl-C" not in note
    assert "before Ctrl-C stopped" in unclean_note({**meta, "stop_signal": "SIGINT"})
    assert stop_signal_words({"stopped_by": "interrupt"}) == "Ctrl-C"  # an older run.json


def test_a_job_that_exited_0_after_recording_stopped_is_not_called_unclean() -> None:
    """Was: "the job did not finish cleanly" for a job that exited 0 on a full disk."""
    note = unclean_note({"exit_code": 0, "recording": FULL_DISK})
    assert "did not finish cleanly" not in note
    assert "the first 1.5 s that could be recorded (No space left on device)" in note
    assert "exit 0" in note
    killed = unclean_note({"exit_code": 137, "signal": "SIGKILL", "recording": FULL_DISK})
    assert "did not finish cleanly" in killed  # killed as well: that is still said
