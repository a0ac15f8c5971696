"""A DataLoader worker's connection was reset.

A ConnectionResetError from a DataLoader worker is harmless at teardown, and otherwise the
symptom of the worker's own failure.

Anti-pattern::

    a worker dying mid-epoch leaves the others' queues broken

Best practice::

    find the first error above (the worker's own); DataLoader(num_workers=0) shows it
"""

from __future__ import annotations

import re

from trainprof.analysis.crash.common import (
    frame_funcs,
    loop_where,
    make_finding,
    memory_pressure,
)
from trainprof.analysis.crash.row import Built, Hit, Scan
from trainprof.analysis.crash.units import cite, measured_count
from trainprof.analysis.findings import Severity
from trainprof.analysis.rules.registry import signature

_CAUSES = ("worker-killed", "worker-fd-limit", "worker-shm-limit", "host-oom")


def _teardown(hit: Hit) -> bool:
    block = hit.block
    if block is None:
        return False
    return bool(frame_funcs(block) & {"__del__", "_shutdown_workers"}) or (
        "__del__" in block.preamble
    )


NEEDLES = ("ConnectionResetError", "Connection reset by peer")
PATTERNS = tuple(
    re.compile(p)
    for p in (
        r"ConnectionResetError: \[Errno 104\] Connection reset by peer",
        r"ConnectionResetError\(104, 'Connection reset by peer'\)",
        r"\[Errno 104\] Connection reset by peer",
    )
)


@signature(
    id="worker-reset",
    title="A DataLoader worker's connection was reset",
    order=90,
    needles=NEEDLES,
    patterns=PATTERNS,
)
def build(scan: Scan) -> Built | None:
    hits = list(scan.hits)
    if not hits:
        return None
    ctx = scan.ctx
    last = hits[-1]
    evidence = [cite(last.text)]
    if len(hits) > 1:
        evidence.append(f"{len(hits)} occurrences")
    cause = next((i for i in _CAUSES if i in scan.fired), None)
    if all(_teardown(hit) for hit in hits):
        evidence.append(
            "raised only in `__del__` → `_shutdown_workers`, while a finished iterator was being "
            "cleaned up after its workers had exited: it does not affect training"
        )
        if ctx.exit_code == 0:
            evidence.append("the job exited 0")
        return (
            make_finding(
                "worker-reset",
                "info",
                "ConnectionResetError at DataLoader teardown is harmless",
                evidence,
                [
                    "Nothing to fix. Keep `num_workers`: setting it to 0 only makes loading serial "
                    "and slow"
                ],
                None,
            ),
            tuple(hits),
        )
    if cause:
        evidence.append(
            f"the main process lost the socket to a worker that had already failed ({cause})"
        )
        return (
            make_finding(
                "worker-reset",
                "info",
                f"ConnectionResetError is a symptom of {cause}",
                evidence,
                [f"Fix {cause}; this error goes away with it"],
                None,
            ),
            tuple(hits),
        )
    funcs = set().union(*(frame_funcs(hit.block) for hit in hits))
    if funcs & {"rebuild_storage_fd", "detach", "recvfds", "get_connection"}:
        evidence.append(
            "raised while receiving a batch's shared tensor from a worker (file_descriptor "
            "sharing): the worker's end of the socket was gone"
        )
    if "_pin_memory_loop" in funcs:
        evidence.append("raised in the pin-memory thread")
    soft, hard = measured_count(ctx.nofile_soft), measured_count(ctx.nofile_hard)
    if soft is not None:
        evidence.append(
            f"RLIMIT_NOFILE soft {soft}, hard {hard if hard is not None else 'unknown'}"
        )
    evidence.extend(memory_pressure(ctx).evidence)
    severity: Severity = "warning" if ctx.exit_code == 0 else "error"
    fix = [
        "Look for the worker's own failure first (killed by a signal, out of memory, open-files "
        "limit): the reset is how the main process notices it",
        "If workers run out of descriptors: raise `ulimit -n`, or "
        '`torch.multiprocessing.set_sharing_strategy("file_system")`',
        "Do not 'fix' it with num_workers=0: that hides the cause and makes loading serial",
    ]
    return (
        make_finding(
            "worker-reset",
            severity,
            "The connection to a DataLoader worker was reset mid-training",
            evidence,
            fix,
            loop_where(scan.doc, last),
        ),
        tuple(hits),
    )
