"""Reading a run directory's files: regular files only, and never more than their size.

A run directory may come from elsewhere (a copy, an archive, a colleague's), and a file in it
may be a symlink to ``/dev/zero``, a FIFO or a file that grows for ever: read through ``open``,
each would keep `trainprof report` reading without end. Every reader of a run directory opens
its files here: never through a symlink, only a regular file, and at most the size it had when
opened. What is not a regular file is skipped, and ``irregular`` names it so that it is said.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from pathlib import Path
from typing import IO, Any

_KINDS = {
    stat.S_IFLNK: "a symlink",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
}


class NotRegularFile(OSError):
    """A run directory's file that is a symlink, a device, a FIFO or a socket."""


def open_regular(path: str | Path, text: bool = False) -> IO[Any]:
    """``path`` opened to read, when it is a regular file (not through a symlink), read to at
    most its size when opened: text is UTF-8 with bad bytes replaced. OSError otherwise
    (NotRegularFile for what is not a regular file)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)  # O_NONBLOCK: opening a FIFO does not wait for a writer
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotRegularFile(errno.ELOOP, "not a regular file (a symlink)", str(path)) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            what = _KINDS.get(stat.S_IFMT(st.st_mode), "a directory")
            raise NotRegularFile(errno.EINVAL, f"not a regular file ({what})", str(path))
        raw = _Bounded(fd, st.st_size)
    except BaseException:
        os.close(fd)
        raise
    buffered = io.BufferedReader(raw)
    return io.TextIOWrapper(buffered, encoding="utf-8", errors="replace") if text else buffered


def irregular(run_dir: str | Path) -> list[str]:
    """The entries of a run directory that are neither a regular file nor a directory, each
    as ``name (what it is)``: skipped by every reader."""
    out = []
    try:
        entries = sorted(os.scandir(run_dir), key=lambda e: e.name)
    except OSError:
        return []
    for entry in entries:
        try:
            mode = entry.stat(follow_symlinks=False).st_mode
        except OSError:
            continue
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            out.append(f"{entry.name} ({_KINDS.get(stat.S_IFMT(mode), 'not a regular file')})")
    return out


class _Bounded(io.RawIOBase):
    """A file descriptor read to at most ``limit`` bytes from its start."""

    def __init__(self, fd: int, limit: int) -> None:
        self._file = io.FileIO(fd, "rb")
        self._limit = limit

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._limit - self._file.tell()
        if left <= 0:
            return 0
        view = memoryview(buffer).cast("B")
        return self._file.readinto(view[: min(len(view), left)]) or 0

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_END:
            return self._file.seek(self._limit + offset)
        return self._file.seek(offset, whence)

    def tell(self) -> int:
        return self._file.tell()

    def close(self) -> None:
        self._file.close()
        super().close()

    def fileno(self) -> int:
        return self._file.fileno()
