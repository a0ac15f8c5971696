"""/dev/shm: DataLoader workers hand every batch to the main process through it.

When it is too small a worker dies with "Bus error" / "unable to open shared memory object"
mid-epoch; Docker's default is only 64 MiB.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from trainprof.doctor.base import CheckResult, MiB, fmt_bytes, result
from trainprof.doctor.cpu import ASSUMED_WORKERS_NOTE

AREA = "shm"
SHM_PATH = "/dev/shm"
PREFETCH_FACTOR = 2  # torch's DataLoader default
HELD_BY_MAIN = 2  # batches the training loop keeps alive while workers refill the queue
# Without --workers/--batch-mb, assume a typical image job: 4 workers, 64 MB batches.
ASSUMED_WORKERS = 4
ASSUMED_BATCH_MB = 64.0


@dataclass(frozen=True)
class ShmInputs:
    path: str
    exists: bool
    total_bytes: int | None
    free_bytes: int | None
    workers: int | None = None
    batch_mb: float | None = None
    workers_assumed: bool = False  # workers is the doctor's assumption, not --workers


def required_bytes(workers: int, batch_mb: float) -> int:
    """Batches alive in shared memory at once: every worker's prefetched ones plus the main's."""
    in_flight = workers * PREFETCH_FACTOR + HELD_BY_MAIN if workers > 0 else 0
    return int(in_flight * batch_mb * MiB)


def check_shm(inp: ShmInputs) -> CheckResult:
    """Fail when free shm cannot hold the batches in flight; warn when under 2x that."""
    assumed: list[str] = []
    if inp.workers is None:
        assumed.append(f"{ASSUMED_WORKERS} workers")
    elif inp.workers_assumed:
        assumed.append(ASSUMED_WORKERS_NOTE)
    if inp.batch_mb is None:
        assumed.append(f"{ASSUMED_BATCH_MB:g} MiB batches")
    workers = ASSUMED_WORKERS if inp.workers is None else inp.workers
    batch_mb = ASSUMED_BATCH_MB if inp.batch_mb is None else inp.batch_mb
    fixes = (
        "docker run --shm-size=8g ...  (Kubernetes: mount an emptyDir with medium: Memory at /dev/shm)",
        "on a host: sudo mount -o remount,size=8G /dev/shm",
        "or lower DataLoader(num_workers=..., prefetch_factor=...) / the batch size",
    )
    if not inp.exists or inp.total_bytes is None or inp.free_bytes is None:
        return result(
            AREA,
            "warn",
            "shm-small",
            f"{inp.path} is missing: DataLoader workers cannot share batches",
            (f"{inp.path} does not exist or cannot be measured",),
            fixes,
        )
    if workers == 0:
        return result(
            AREA,
            "ok",
            "shm-small",
            f"{inp.path} {fmt_bytes(inp.total_bytes)}: not used with --workers 0",
            (f"free {fmt_bytes(inp.free_bytes)}; num_workers=0 loads in the main process",),
        )
    need = required_bytes(workers, batch_mb)
    basis = (
        f"{workers} workers x prefetch {PREFETCH_FACTOR} + {HELD_BY_MAIN} held by the loop, "
        f"x {batch_mb:g} MiB batches"
    )
    if assumed:
        basis += f" (assumed: {'; '.join(assumed)}; pass --workers N --batch-mb M for your job)"
    evidence = (
        f"{inp.path}: {fmt_bytes(inp.total_bytes)} total, {fmt_bytes(inp.free_bytes)} free",
        f"needs >= {fmt_bytes(need)} free: {basis}",
    )
    if inp.free_bytes < need:
        return result(
            AREA,
            "fail",
            "shm-small",
            f"{inp.path} too small: {fmt_bytes(inp.free_bytes)} free < {fmt_bytes(need)} needed",
            evidence
            + ("workers will die with 'Bus error' / 'unable to open shared memory object'",),
            fixes,
        )
    if inp.free_bytes < 2 * need:
        return result(
            AREA,
            "warn",
            "shm-small",
            f"{inp.path} tight: {fmt_bytes(inp.free_bytes)} free, < 2x the {fmt_bytes(need)} needed",
            evidence + ("a larger batch or more workers will crash workers with 'Bus error'",),
            fixes,
        )
    return result(AREA, "ok", "shm-small", f"{inp.path} {fmt_bytes(inp.free_bytes)} free", evidence)


def gather_shm(
    path: str = SHM_PATH,
    workers: int | None = None,
    batch_mb: float | None = None,
    workers_assumed: bool = False,
) -> ShmInputs:
    """statvfs of the shm mount; absent on macOS and in some minimal sandboxes."""
    try:
        st = os.statvfs(path)
    except OSError:
        return ShmInputs(path, False, None, None, workers, batch_mb, workers_assumed)
    return ShmInputs(
        path=path,
        exists=True,
        total_bytes=st.f_blocks * st.f_frsize,
        free_bytes=st.f_bavail * st.f_frsize,
        workers=workers,
        batch_mb=batch_mb,
        workers_assumed=workers_assumed,
    )
