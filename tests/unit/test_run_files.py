"""A run directory's files are read only as regular files, and to at most their size."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trainprof.store.run_files import NotRegularFile, irregular, open_regular


def test_a_file_that_grows_while_read_is_read_to_its_size_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "events-1.tp"
    path.write_bytes(b"a\nb\n")
    with open_regular(path, text=True) as f, open(path, "ab") as writer:
        writer.write(b"c\n" * 1000)  # a writer that never stops, in the small
        writer.flush()
        assert f.read() == "a\nb\n"


def test_a_tail_seeks_from_the_size_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "stdout.log"
    path.write_bytes(b"0123456789")
    with open_regular(path) as f:
        f.seek(max(0, f.seek(0, os.SEEK_END) - 4))
        assert f.read() == b"6789"


@pytest.mark.parametrize("kind", ["symlink", "fifo", "dir"])
def test_what_is_not_a_regular_file_is_refused_and_named(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "samples.jsonl"
    if kind == "symlink":
        (tmp_path / "real").write_text("{}\n")
        path.symlink_to(tmp_path / "real")  # even to a regular file: never through a symlink
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    with pytest.raises(NotRegularFile if kind != "dir" else OSError):
        open_regular(path)  # a FIFO: refused at once, no writer waited for
    named = {"symlink": ["samples.jsonl (a symlink)"], "fifo": ["samples.jsonl (a FIFO)"]}
    assert irregular(tmp_path) == named.get(kind, [])
