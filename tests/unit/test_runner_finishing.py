"""Signals while `trainprof run` writes the report of a job that has ended: the first is said,
not obeyed (tests/integration/test_run_process.py delivers one to a real run); a second stops
trainprof at once."""

from __future__ import annotations

import os
import signal

import pytest

from trainprof.runner import _Finishing


def test_a_second_signal_while_finishing_the_report_stops_trainprof(
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt), _Finishing():
        os.kill(os.getpid(), signal.SIGINT)  # the first: said, not obeyed
        assert "finishing its report" in capsys.readouterr().err
        os.kill(os.getpid(), signal.SIGINT)  # the second: stop now
        raise AssertionError("a second Ctrl-C must stop trainprof")
    assert signal.getsignal(signal.SIGINT) is before, "the handlers are given back"
