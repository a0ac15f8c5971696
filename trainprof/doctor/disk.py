"""Disk: room for checkpoints where they go, and how fast the dataset reads.

A checkpoint save that hits a full disk kills a run hours in; a dataset on a spinning disk or a
network mount makes every epoch input-bound (the "stutter" of a job reading from an HDD).
"""

from __future__ import annotations

import errno
import mmap
import os
import random
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from trainprof.doctor.base import CheckResult, GiB, MiB, Status, fmt_bytes, result

AREA = "disk"
CKPT_FAIL_BYTES = 2 * GiB
CKPT_WARN_BYTES = 20 * GiB  # a few checkpoints of a model with optimizer state
READ_BUDGET_S = 0.7
READ_BUDGET_BYTES = 256 * MiB
PER_FILE_BYTES = 4 * MiB
LIST_LIMIT = 5000
CHUNK = 1 * MiB
SLOW_MB_S = 100.0  # below: an HDD or a network mount for large files
SLOW_FILES_S = 300.0  # below: random small-file reads an HDD manages (~100 IOPS)
SMALL_FILE = 1 * MiB


@dataclass(frozen=True)
class CkptInputs:
    path: str
    measured_on: str  # the nearest existing directory
    exists: bool
    writable: bool
    free_bytes: int
    total_bytes: int


@dataclass(frozen=True)
class DataReadInputs:
    path: str
    files_seen: int
    files_read: int
    bytes_read: int
    seconds: float
    direct: bool  # O_DIRECT: the page cache was bypassed
    median_file_bytes: int | None
    error: str | None = None


def check_ckpt(inp: CkptInputs) -> CheckResult:
    """Fail under 2 GiB free or when unwritable; warn under 20 GiB."""
    where = "current directory" if inp.path == "." else inp.path
    if not inp.exists:
        where += f" (not created yet; measured on {inp.measured_on})"
    evidence = (
        f"{where}: {fmt_bytes(inp.free_bytes)} free of {fmt_bytes(inp.total_bytes)}",
        f"fail under {fmt_bytes(CKPT_FAIL_BYTES)}, warn under {fmt_bytes(CKPT_WARN_BYTES)}: "
        "a checkpoint with optimizer state is ~3x the model's weights",
    )
    fixes = (
        "point checkpoints at a larger volume (--ckpt-dir to re-check it)",
        "keep fewer checkpoints (e.g. max_keep_ckpts=3) or save without optimizer state",
    )
    if not inp.writable:
        return result(
            AREA,
            "fail",
            "ckpt-disk-low",
            f"checkpoint dir not writable: {inp.measured_on}",
            evidence,
            ("choose a writable --ckpt-dir",),
        )
    status: Status = "ok"
    if inp.free_bytes < CKPT_FAIL_BYTES:
        status = "fail"
    elif inp.free_bytes < CKPT_WARN_BYTES:
        status = "warn"
    title = f"{fmt_bytes(inp.free_bytes)} free for checkpoints"
    return result(
        AREA,
        status,
        "ckpt-disk-low",
        ("only " if status == "fail" else "") + title,
        evidence,
        fixes,
    )


def check_data_read(inp: DataReadInputs) -> CheckResult:
    """Large files are judged by MiB/s, small ones by files/s (random-access latency)."""
    if inp.error or inp.files_read == 0:
        return result(
            AREA,
            "warn",
            "data-read-slow",
            f"could not read the dataset at {inp.path}",
            (inp.error or f"no readable files ({inp.files_seen} entries seen)",),
            ("check the path and its permissions",),
        )
    secs = max(inp.seconds, 1e-6)
    mb_s = inp.bytes_read / MiB / secs
    files_s = inp.files_read / secs
    small = inp.median_file_bytes is not None and inp.median_file_bytes < SMALL_FILE
    evidence = [
        f"read {inp.files_read} files, {fmt_bytes(inp.bytes_read)} in {secs:.2f} s: "
        f"{mb_s:.0f} MiB/s, {files_s:.0f} files/s (median file {fmt_bytes(inp.median_file_bytes)})",
        "O_DIRECT: page cache bypassed"
        if inp.direct
        else "buffered reads: cached files read at memory speed, so this is an upper bound",
        f"threshold: {SLOW_FILES_S:.0f} files/s for small files"
        if small
        else f"threshold: {SLOW_MB_S:.0f} MiB/s for large files",
    ]
    slow = files_s < SLOW_FILES_S if small else mb_s < SLOW_MB_S
    if slow:
        return result(
            AREA,
            "warn",
            "data-read-slow",
            f"dataset reads slowly: {files_s:.0f} files/s, {mb_s:.0f} MiB/s",
            evidence,
            (
                "copy the dataset to a local SSD/NVMe (or /dev/shm if it fits) before training",
                "pack small files into shards (tar/WebDataset, LMDB) and raise DataLoader(num_workers=...)",
            ),
        )
    return result(
        AREA,
        "ok",
        "data-read-slow",
        f"dataset reads at {mb_s:.0f} MiB/s, {files_s:.0f} files/s",
        evidence,
    )


def _existing(path: Path) -> Path:
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def gather_ckpt(path: Path) -> CkptInputs:
    base = _existing(path)
    st = os.statvfs(base)
    return CkptInputs(
        path=str(path),
        measured_on=str(base),
        exists=path.exists(),
        writable=os.access(base, os.W_OK),
        free_bytes=st.f_bavail * st.f_frsize,
        total_bytes=st.f_blocks * st.f_frsize,
    )


def _list_files(root: Path, limit: int = LIST_LIMIT) -> list[Path]:
    """Up to ``limit`` regular files under root, without walking a huge tree to its end."""
    if root.is_file():
        return [root]
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            p = Path(dirpath, name)
            if p.is_file():
                found.append(p)
                if len(found) >= limit:
                    return found
    return found


def _read_file(path: Path, buf: mmap.mmap, direct: bool, budget: int) -> int:
    flags = os.O_RDONLY | (getattr(os, "O_DIRECT", 0) if direct else 0)
    fd = os.open(path, flags)
    try:
        total = 0
        while total < budget:
            n = os.readv(fd, [buf])
            if n <= 0:
                break
            total += n
        return total
    finally:
        os.close(fd)


def gather_data_read(path: Path, budget_s: float = READ_BUDGET_S, seed: int = 0) -> DataReadInputs:
    """Read files in random order, as a shuffling DataLoader does, for a bounded time/volume.

    O_DIRECT (with a page-aligned mmap buffer) keeps the page cache from flattering the result;
    file systems that refuse it (tmpfs, some network mounts) fall back to buffered reads.
    """
    files = _list_files(path)
    random.Random(seed).shuffle(files)
    buf = mmap.mmap(-1, CHUNK)
    direct = hasattr(os, "O_DIRECT")
    sizes: list[int] = []
    total = 0
    error: str | None = None
    start = time.perf_counter()
    try:
        for f in files:
            if time.perf_counter() - start > budget_s or total >= READ_BUDGET_BYTES:
                break
            try:
                n = _read_file(f, buf, direct, PER_FILE_BYTES)
            except OSError as exc:
                if direct and exc.errno in (errno.EINVAL, errno.EOPNOTSUPP):  # no O_DIRECT here
                    direct = False
                    try:
                        n = _read_file(f, buf, False, PER_FILE_BYTES)
                    except OSError as exc2:
                        error = f"{f.name}: {exc2.strerror}"
                        continue
                else:
                    error = f"{f.name}: {exc.strerror}"
                    continue
            total += n
            sizes.append(f.stat().st_size)
    finally:
        buf.close()
    elapsed = time.perf_counter() - start
    return DataReadInputs(
        path=str(path),
        files_seen=len(files),
        files_read=len(sizes),
        bytes_read=total,
        seconds=elapsed,
        direct=direct,
        median_file_bytes=int(statistics.median(sizes)) if sizes else None,
        error=None if sizes else error,
    )
