"""console.relative_to: a path under the job's working directory is shown relative to it, one
that is not (an installed library, a path that only holds the directory's further in) stays
absolute; report.json's where and hotspot, the HTML page and the trace use the same function."""

from __future__ import annotations

import pytest

from trainprof.render.console import relative_to


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("/home/me/proj/train.py:42 (main)", "train.py:42 (main)"),
        ("/home/me/proj/lib/data.py:7 (Shards.__getitem__)", "lib/data.py:7 (Shards.__getitem__)"),
        (
            "the loop calls validate() at /home/me/proj/train.py:88",
            "the loop calls validate() at train.py:88",
        ),
        ("/usr/lib/python3/dist-packages/timm/data/loader.py:131 (PrefetchLoader.__iter__)", None),
        ("/mnt/home/me/proj/train.py:42 (main)", None),
        ("/home/me/project/train.py:42 (main)", None),
        ("/home/me/proj.old/train.py:1 (main)", None),
    ],
)
def test_under_the_directory_relative_elsewhere_absolute(text: str, shown: str | None) -> None:
    assert relative_to("/home/me/proj")(text) == (text if shown is None else shown)
    assert relative_to("/home/me/proj/")(text) == (text if shown is None else shown)


def test_no_directory_or_the_root_changes_nothing() -> None:
    assert relative_to(None)("/home/me/proj/train.py:1 (main)") == "/home/me/proj/train.py:1 (main)"
    assert relative_to("/")("/home/me/train.py:1 (main)") == "/home/me/train.py:1 (main)"
