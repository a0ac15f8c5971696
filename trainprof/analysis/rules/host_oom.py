"""The job ran out of host memory: an allocation refused, or the kernel's OOM killer.

An allocation was refused by torch's CPU allocator (``DefaultCPUAllocator: can't allocate
memory``), numpy (``Unable to allocate 17.9 TiB for an array``), Python (``MemoryError``) or
C++ (``std::bad_alloc``): one request larger than the whole machine is a size computed wrong (an
unintended broadcast, a bad count), not a leak; one that fits the machine but not what was left
is exhaustion. Or the whole job was SIGKILLed with host memory measured near its limit: the
kernel's OOM killer.

Anti-pattern::

    the whole dataset loaded into RAM in every worker; a (N, 1) - (N,) broadcast that asks for N x N

Best practice::

    memory-map the data (numpy.memmap), load lazily in __getitem__; shapes that match
"""

from __future__ import annotations

import re

from trainprof.analysis.crash.common import (
    code_where,
    in_worker,
    make_finding,
    memory_pressure,
)
from trainprof.analysis.crash.row import Built, Hit, Scan
from trainprof.analysis.crash.units import (
    SIZE,
    cite,
    fmt_bytes,
    measured_count,
    measured_text,
    to_bytes,
)
from trainprof.analysis.rules.registry import signature

KILLED = (
    re.compile(r"^Killed$"),
    re.compile(r"Out of memory: Kill(?:ed)? process (\d+)"),
    re.compile(r"oom-kill"),
)
REFUSED = (
    re.compile(
        r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory): "
        r"you tried to allocate (\d+) bytes"
    ),
    re.compile(
        rf"_ArrayMemoryError: Unable to allocate ({SIZE}) for an array with shape (\([^)]*\)) "
        r"and data type (\w+)"
    ),
    re.compile(r"^MemoryError\b"),
    re.compile(r"std::bad_alloc"),
)
_SIZED = (len(KILLED), len(KILLED) + 1)  # the refusals that state the size asked for

_SIZE_FIXES = (
    "Check the sizes on that line: print each operand's `.shape` (or the size it is built "
    "from). Most often it is an unintended broadcast: `(N, 1)` against `(N,)` makes `(N, N)`; "
    "match them (`pred.squeeze(1)`, or `nn.functional.mse_loss`, which warns about it)",
    "Where that size is meant (a whole dataset at once), process it in chunks (`torch.split`, "
    "a DataLoader over the evaluation set) or memory-map it (`numpy.memmap`)",
)
_CUT_MEMORY = (
    "Cut host memory: fewer `num_workers` and `prefetch_factor=1`; load samples lazily or "
    "memory-map them instead of holding the dataset in RAM; keep metadata in numpy arrays "
    "rather than Python lists (each worker copies the objects it touches)"
)
_RAISE_LIMIT = (
    "Or raise the limit: Docker `--memory`, Kubernetes `resources.limits.memory`, SLURM `--mem`"
)


NEEDLES = (
    "Killed",
    "Out of memory",
    "oom-kill",
    "DefaultCPUAllocator",
    "MemoryError",
    "bad_alloc",
)


@signature(
    id="host-oom",
    examples=("crash_host_alloc",),
    title="The job ran out of host memory: an allocation refused, or the kernel's OOM killer",
    order=80,
    needles=NEEDLES,
    patterns=(*KILLED, *REFUSED),
)
def build(scan: Scan) -> Built | None:
    refused = [hit for hit in scan.hits if hit.pattern >= len(KILLED)]
    if refused:
        return _refused(scan, refused)
    return _killed(scan)


def _refused(scan: Scan, hits: list[Hit]) -> Built:
    """An allocation the allocator or the kernel refused: its size against the machine's."""
    hit = next((h for h in hits if h.pattern in _SIZED), hits[0])
    ctx, m = scan.ctx, hit.match
    size: float | None = None
    evidence = [cite(hit.text)]
    if hit.pattern == _SIZED[0]:
        size = float(m[1])
    elif hit.pattern == _SIZED[1]:
        size = to_bytes(m[1])
        evidence.append(f"a numpy array of shape {m[2]} and dtype {m[3]}")
    worker = in_worker(hit)
    if worker:
        evidence.append(f"in {worker}")
    total = measured_count(ctx.mem_total_bytes) or None
    too_big = size is not None and total is not None and size > total
    asked = f"an allocation of {fmt_bytes(size)}" if size is not None else "an allocation"
    title = f"Host memory: {asked} was refused"
    pressure = memory_pressure(ctx)
    if too_big:
        assert size is not None and total is not None
        title += f", more than this machine's {fmt_bytes(total)}"
        evidence.append(
            f"one request of {fmt_bytes(size)}, {size / total:,.0f}× this machine's memory "
            f"({fmt_bytes(total)}): no training step needs that; a size computed wrong does"
        )
        fix = list(_SIZE_FIXES)
    elif pressure.near is False:
        evidence.extend(pressure.evidence)
        evidence.append(
            "memory never came near its limit, so the refused request alone was larger than "
            "what was left: a size computed wrong, or a cap on the process's address space "
            "(`ulimit -v`)"
        )
        fix = [*_SIZE_FIXES, "Check `ulimit -v` (RLIMIT_AS) in the job's shell: unlimited?"]
    else:
        evidence.extend(pressure.evidence)
        fix = [
            "Process the tensor at that line in smaller pieces (a smaller batch, `torch.split`)",
            _CUT_MEMORY,
            _RAISE_LIMIT,
        ]
    frame = code_where(scan.doc, hit)
    finding = make_finding(
        "host-oom", "error", title, evidence, fix, frame.where if frame else None
    )
    return finding, tuple(hits)


def _killed(scan: Scan) -> Built | None:
    """The whole job SIGKILLed with memory near its limit: the kernel's OOM killer."""
    ctx = scan.ctx
    signal = (measured_text(ctx.signal) or "").upper()
    code = ctx.exit_code if isinstance(ctx.exit_code, int) else None
    sigkill = code in (137, -9) or signal in ("SIGKILL", "KILL", "9")
    if not sigkill:
        return None
    pressure = memory_pressure(ctx)
    if not pressure.near:
        return None  # SIGKILL far from the limit (or unmeasured) is not evidence of an OOM kill
    evidence = [cite(hit.text) for hit in scan.hits[-2:]]
    status = f"exit code {code}" if code is not None else "killed"
    if signal:
        status += f", signal {signal}"
    evidence.append(f"job {status}: SIGKILL, which is what the kernel OOM killer sends")
    evidence.extend(pressure.evidence)
    fix = [
        _CUT_MEMORY,
        _RAISE_LIMIT,
        "Confirm with `dmesg -T | grep -i -E 'killed process|out of memory'`",
    ]
    return (
        make_finding(
            "host-oom",
            "error",
            "The job was killed by the kernel's OOM killer (host memory)",
            evidence,
            fix,
            None,
        ),
        tuple(scan.hits),
    )
