"""Signals while `trainprof run` writes the report of a job that has ended: the first is said,
not obeyed (tests/integration/test_run_process.py delivers one to a real run); a second stops
trainprof at once."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from trainprof.collect.runner import _Finishing


@pytest.fixture
def sigint_as_in_a_terminal() -> Iterator[None]:
    """Python's own SIGINT handler, as in a terminal (a shell that started pytest in the
    background has SIGINT ignored, and trainprof leaves an ignored signal ignored)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_a_second_signal_while_finishing_the_report_stops_trainprof(
    capsys: pytest.CaptureFixture[str], sigint_as_in_a_terminal: None
) -> None:
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt), _Finishing():
        os.kill(os.getpid(), signal.SIGINT)  # the first: said, not obeyed
        assert "finishing its report" in capsys.readouterr().err
        os.kill(os.getpid(), signal.SIGINT)  # the second: stop now
        raise AssertionError("a second Ctrl-C must stop trainprof")
    assert signal.getsignal(signal.SIGINT) is before, "the handlers are given back"


def test_an_ignored_signal_stays_ignored_while_finishing() -> None:
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with _Finishing():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGINT)  # nothing happens
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)
