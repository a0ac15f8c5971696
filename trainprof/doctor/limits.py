"""RLIMIT_NOFILE: with torch's default `file_descriptor` sharing strategy every tensor a
DataLoader worker sends holds an open fd until the batch is freed.

A low soft limit gives "Too many open files" / "received 0 items of ancdata", or a silent hang
when the error lands in a worker feeder thread.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

from trainprof.doctor.base import CheckResult, result
from trainprof.doctor.cpu import ASSUMED_WORKERS_NOTE

AREA = "limits"
BASE_FDS = 256  # interpreter, shared libraries, sockets, the job's own files
PREFETCH_FACTOR = 2
FDS_PER_BATCH = 8  # one per tensor storage in a collated batch (dicts of a few tensors)
WARN_FLOOR = 4096  # batches the loop keeps alive (metrics lists, etc.) each hold their fds
UNLIMITED = 1 << 62


@dataclass(frozen=True)
class NofileInputs:
    soft: int
    hard: int
    workers: int
    workers_assumed: bool
    sharing_strategy: str | None  # None when torch could not be imported


def fds_in_flight(workers: int) -> int:
    """fds held while batches travel: each worker's prefetched and in-transit batch."""
    return BASE_FDS + workers * (PREFETCH_FACTOR + 1) * FDS_PER_BATCH


def _limit(n: int) -> str:
    return "unlimited" if n >= UNLIMITED else str(n)


def check_nofile(inp: NofileInputs) -> CheckResult:
    """Fail below the fds in flight; warn below a margin sized for the sharing strategy."""
    strategy = inp.sharing_strategy or "file_descriptor"
    need = fds_in_flight(inp.workers)
    per_fd = strategy == "file_descriptor"
    warn_below = max(4 * need, WARN_FLOOR) if per_fd else 2 * need
    basis = (
        f"{inp.workers} workers x (prefetch {PREFETCH_FACTOR} + 1) x {FDS_PER_BATCH} tensors "
        f"+ {BASE_FDS} base = {need} fds in flight"
    )
    if inp.workers_assumed:
        basis += f" (assumed: {ASSUMED_WORKERS_NOTE}; pass --workers N)"
    strategy_note = (
        f"sharing strategy {strategy}"
        + ("" if inp.sharing_strategy else " (torch's Linux default; torch not importable)")
        + (": one fd per shared tensor" if per_fd else ": shared by file name, few fds")
    )
    evidence = (
        f"RLIMIT_NOFILE soft {_limit(inp.soft)}, hard {_limit(inp.hard)}",
        basis,
        strategy_note,
        f"warn below {warn_below}: tensors the loop keeps alive hold their fds too",
    )
    fixes: list[str] = []
    if inp.hard >= warn_below:
        raise_to = min(inp.hard, 65536)
        fixes.append(
            f"ulimit -n {raise_to}  (in the shell that starts training; the hard limit allows it)"
        )
        fixes.append(
            "or first thing in the script: import resource; _, h = resource.getrlimit("
            "resource.RLIMIT_NOFILE); resource.setrlimit(resource.RLIMIT_NOFILE, (h, h))"
        )
    else:
        fixes.append(
            "raise the hard limit: docker run --ulimit nofile=65536:65536, "
            "LimitNOFILE= in a systemd unit, or nofile in /etc/security/limits.conf"
        )
    if per_fd:
        fixes.append('or torch.multiprocessing.set_sharing_strategy("file_system")')
    if inp.soft < need:
        return result(
            AREA,
            "fail",
            "nofile-low",
            f"open-file limit {inp.soft} < {need} fds DataLoader workers need",
            evidence,
            fixes,
        )
    if inp.soft < warn_below:
        return result(
            AREA,
            "warn",
            "nofile-low",
            f"open-file limit {inp.soft} is low for DataLoader workers ({strategy})",
            evidence,
            fixes,
        )
    return result(AREA, "ok", "nofile-low", f"open-file limit {_limit(inp.soft)}", evidence)


def gather_nofile(
    workers: int, workers_assumed: bool, sharing_strategy: str | None
) -> NofileInputs:
    """This process's limits: the training job inherits them from the same shell."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return NofileInputs(
        soft=UNLIMITED if soft == resource.RLIM_INFINITY else soft,
        hard=UNLIMITED if hard == resource.RLIM_INFINITY else hard,
        workers=workers,
        workers_assumed=workers_assumed,
        sharing_strategy=sharing_strategy,
    )
