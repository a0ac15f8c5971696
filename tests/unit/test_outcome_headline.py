"""outcome.headline: a multi-line exception message in one row, its first non-blank line and
the count of the lines after it."""

from __future__ import annotations

import pytest

from trainprof.analysis.outcome import headline


@pytest.mark.parametrize(
    ("message", "shown"),
    [
        ("CUDA out of memory", ("CUDA out of memory", 0)),
        ("a:\n  b\n  c", ("a:", 2)),
        (
            "\n\nCaught ValueError in DataLoader worker process 0.\nOriginal Traceback",
            ("Caught ValueError in DataLoader worker process 0.", 1),
        ),
        ("line one\r\nline two\n\n", ("line one", 1)),
        ("", ("", 0)),
    ],
)
def test_the_first_non_blank_line_and_how_many_follow(message: str, shown: tuple[str, int]) -> None:
    assert headline(message) == shown
