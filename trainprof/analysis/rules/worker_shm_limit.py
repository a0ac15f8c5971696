"""DataLoader workers run out of shared memory (/dev/shm).

Seen as a bus error in a worker, or as a failed write into /dev/shm.

Anti-pattern::

    docker run ...  # default 64 MiB /dev/shm, num_workers=8

Best practice::

    docker run --shm-size=8g ...  (or --ipc=host)
"""

from __future__ import annotations

import re

from trainprof.analysis.crash.common import in_worker, loop_where, make_finding
from trainprof.analysis.crash.row import Built, Scan
from trainprof.analysis.crash.units import cite, fmt_bytes, measured_count, pct
from trainprof.analysis.rules.registry import signature

NEEDLES = (
    "bus error",
    "Bus error",
    "out of shared memory",
    "No space left on device",
    "unable to write to file <",
    "insufficient shared memory",
)
PATTERNS = tuple(
    re.compile(p)
    for p in (
        r"Unexpected bus error encountered in worker",
        r"DataLoader worker \(pid (\d+)\) is killed by signal: Bus error",
        r"out of shared memory",
        r"unable to [^<]{1,60}<(/?torch_[^>]*)>[^:]{0,80}: No space left on device",
        r"unable to write to file <(/?torch_[^>]*)>",
        r"No space left on device.{0,200}/dev/shm|/dev/shm.{0,200}No space left on device",
        r"insufficient shared memory",
    )
)


@signature(
    id="worker-shm-limit",
    title="DataLoader workers run out of shared memory (/dev/shm)",
    order=50,
    needles=NEEDLES,
    patterns=PATTERNS,
)
def build(scan: Scan) -> Built | None:
    if not scan.hits:
        return None
    ctx = scan.ctx
    best = min(scan.hits, key=lambda hit: (_SHM_RANK[hit.pattern], -hit.index))
    evidence = [cite(best.text)]
    for hit in scan.hits:
        if hit is not best and hit.pattern in (0, 1, 3):
            evidence.append(cite(hit.text))
    pids = sorted({hit.match[1] for hit in scan.hits if hit.pattern == 1})
    if pids:
        evidence.append(f"worker pid {', '.join(pids)} died of SIGBUS (Bus error)")
    workers = sorted({w for hit in scan.hits if (w := in_worker(hit))})
    if workers:
        evidence.append(f"failed in {', '.join(workers)} while putting a batch in shared memory")
    size = measured_count(ctx.shm_size_bytes) or None
    peak = measured_count(ctx.shm_peak_used_bytes)
    if size is not None:
        note = " — Docker's default" if size == 64 * (1 << 20) else ""
        evidence.append(f"/dev/shm is {fmt_bytes(size)}{note}")
    if peak is not None:
        line = f"peak /dev/shm use {fmt_bytes(peak)}"
        if size is not None:
            line += f" ({pct(peak, size)} of it)"
            if peak < 0.5 * size:
                line += (
                    "; well below the size, so shared memory may not be the cause (a SIGBUS also "
                    "comes from a memory-mapped file truncated under the reader)"
                )
        evidence.append(line)
    workers_n = measured_count(ctx.num_workers)
    if workers_n is not None:
        evidence.append(
            f"num_workers={workers_n}: about num_workers × prefetch_factor batches sit in "
            "/dev/shm at once"
        )
    fix = [
        'Docker: `docker run --shm-size=8g ...` (or `--ipc=host`); compose: `shm_size: "8gb"`',
        "Kubernetes: mount an `emptyDir` with `medium: Memory` (and a `sizeLimit`) at /dev/shm",
        "Or need less of it: fewer `num_workers`, `prefetch_factor=1` (default 2), smaller batches",
    ]
    return (
        make_finding(
            "worker-shm-limit",
            "error",
            "DataLoader workers ran out of shared memory (/dev/shm)",
            evidence,
            fix,
            loop_where(scan.doc, best),
        ),
        tuple(scan.hits),
    )


_SHM_RANK = {1: 0, 3: 1, 2: 2, 0: 3, 4: 4, 5: 5, 6: 6}  # the cited line: most telling first
