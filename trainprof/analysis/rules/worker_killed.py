"""A DataLoader worker was killed.

A worker died (a signal, ``exit()``, a native crash); a SIGKILL is read against the measured
memory to tell the OOM killer from something else.

Anti-pattern::

    a worker caching the dataset in memory until the OOM killer takes it

Best practice::

    bounded caches, fewer workers, more memory; read the kernel log (dmesg)
"""

from __future__ import annotations

import re

from trainprof.analysis.crash.common import loop_where, make_finding, memory_pressure
from trainprof.analysis.crash.row import Built, Scan
from trainprof.analysis.crash.units import cite, fmt_bytes, measured_count
from trainprof.analysis.rules.registry import signature

_KILLED_RANK = {0: 0, 1: 1, 3: 2, 2: 3}


NEEDLES = ("DataLoader worker", "encountered in worker")
PATTERNS = tuple(
    re.compile(p)
    for p in (
        r"DataLoader worker \(pid (\d+)\) is killed by signal: ([^.]+)\.",
        r"DataLoader worker \(pid (\d+)\) exited unexpectedly with exit code (-?\d+)",
        r"DataLoader worker \(pid\(s\) ([\d, ]+)\) exited unexpectedly",
        r"Unexpected (segmentation fault|floating-point exception) encountered in worker",
    )
)


@signature(
    id="worker-killed",
    examples=("crash_worker_killed",),
    title="A DataLoader worker was killed",
    order=70,
    needles=NEEDLES,
    patterns=PATTERNS,
)
def build(scan: Scan) -> Built | None:
    hits = list(scan.hits)
    specific = [hit for hit in hits if hit.pattern in (0, 1, 3)]
    explainer = next((i for i in ("worker-shm-limit", "worker-fd-limit") if i in scan.fired), None)
    if not specific and explainer:
        return None  # "exited unexpectedly" after a bus error or EMFILE: already explained
    if not hits:
        return None
    ctx = scan.ctx
    best = min(hits, key=lambda hit: (_KILLED_RANK[hit.pattern], -hit.index))
    evidence = [cite(best.text)]
    signals = {hit.match[1]: hit.match[2].strip() for hit in hits if hit.pattern == 0}
    codes = {hit.match[1]: hit.match[2] for hit in hits if hit.pattern == 1}
    native = sorted({hit.match[1] for hit in hits if hit.pattern == 3})
    pids = sorted(
        set(signals)
        | set(codes)
        | {p.strip() for hit in hits if hit.pattern == 2 for p in hit.match[1].split(",")} - {""}
    )
    for pid, name in signals.items():
        evidence.append(f"worker pid {pid} was killed by signal: {name}")
    for pid, code in codes.items():
        evidence.append(
            f"worker pid {pid} called exit({code}); its own error was not printed (rerun with "
            "num_workers=0 to see it)"
        )
    if native:
        evidence.append(f"the worker reported a {', '.join(native)}: a native crash in the worker")
    if not signals and not codes and not native:
        evidence.append(f"worker pid {', '.join(pids) or '?'} died without a reported cause")
    sigkill = any(name == "Killed" for name in signals.values())
    pressure = memory_pressure(ctx)
    fix: list[str] = []
    title = "A DataLoader worker exited unexpectedly"
    if signals:
        title = (
            f"A DataLoader worker was killed by signal ({', '.join(sorted(set(signals.values())))})"
        )
    if sigkill:
        evidence.extend(pressure.evidence)
        if pressure.near:
            evidence.append(
                "SIGKILL with memory near the limit: the kernel OOM killer most likely killed it"
            )
            title = "A DataLoader worker was killed, most likely by the OOM killer"
        elif pressure.near is False:
            evidence.append(
                "memory was not near the limit: something else sent SIGKILL (a scheduler, a "
                "watchdog, `kill -9`)"
            )
        else:
            evidence.append(
                "SIGKILL is what the kernel OOM killer sends; memory was not measured — check "
                "`dmesg -T | grep -i -E 'killed process|out of memory'`"
            )
        if pressure.near is not False:
            fix.append(
                "Cut worker memory: fewer `num_workers`, `prefetch_factor=1`; keep per-sample "
                "metadata in numpy arrays or tensors rather than Python lists/dicts (workers "
                "copy every Python object they touch)"
            )
            fix.append(
                "Or raise the memory limit (Docker `--memory`, Kubernetes "
                "`resources.limits.memory`, SLURM `--mem`)"
            )
    elif worker_rss := measured_count(ctx.worker_peak_rss_bytes):
        evidence.append(f"a DataLoader worker peaked at {fmt_bytes(worker_rss)} RSS")
    if native or any(name in ("Segmentation fault", "Aborted") for name in signals.values()):
        fix.append(
            "Open file handles and native libraries (h5py, lmdb, cv2) inside `__getitem__` or "
            "`worker_init_fn`, not in `__init__` (handles do not survive fork); or "
            '`DataLoader(..., multiprocessing_context="spawn")`'
        )
    fix.append(
        "Rerun with `num_workers=0` once to see the worker's real error, then restore the workers"
    )
    if explainer:
        evidence.append(f"see also {explainer}")
    return (
        make_finding("worker-killed", "error", title, evidence, fix, loop_where(scan.doc, best)),
        tuple(hits),
    )
