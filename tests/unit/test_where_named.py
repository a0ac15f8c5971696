"""A finding's `where` names the function a reader finds in the file: a generator expression,
comprehension or lambda is named by the function it sits in (blind set C's progress bar was
placed at `ProgressBar._render.<locals>.<genexpr>`)."""

from __future__ import annotations

import pytest

from trainprof.analysis.attribution import named, where


@pytest.mark.parametrize(
    ("qualname", "shown"),
    [
        ("ProgressBar._render.<locals>.<genexpr>", "ProgressBar._render"),
        ("main.<locals>.<lambda>", "main"),
        ("collate.<locals>.<listcomp>.<genexpr>", "collate"),
        ("Trainer.fit.<locals>.closure", "Trainer.fit.<locals>.closure"),  # a named function
        ("train", "train"),
        ("<module>", "<module>"),
    ],
)
def test_an_anonymous_function_is_named_by_the_function_it_sits_in(
    qualname: str, shown: str
) -> None:
    assert named(qualname) == shown
    assert where((qualname, "train.py", 60)) == f"train.py:60 ({shown})"


def test_no_frame_is_no_where() -> None:
    assert where(None) is None
