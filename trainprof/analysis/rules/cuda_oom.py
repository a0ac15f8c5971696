"""CUDA out of memory.

The GPU ran out of memory; the allocator's message tells fragmentation from a step that needs
more than is left, and names the other processes on the GPU.

Anti-pattern::

    DataLoader(dataset, batch_size=512)  # activations do not fit

Best practice::

    smaller batch + gradient accumulation, torch.autocast, activation checkpointing
"""

from __future__ import annotations

import re

from trainprof.analysis.crash.common import code_where, make_finding
from trainprof.analysis.crash.row import Built, Scan
from trainprof.analysis.crash.units import SIZE, cite, fmt_bytes, to_bytes
from trainprof.analysis.rules.registry import signature

OOM_NEW = re.compile(
    rf"CUDA out of memory\. Tried to allocate ({SIZE})\. GPU (\d+) has a total capaci?ty of "
    rf"({SIZE}) of which ({SIZE}) is free\."
)
OOM_OLD = re.compile(
    rf"CUDA out of memory\. Tried to allocate ({SIZE}) \(GPU (\d+); ({SIZE}) total capacity; "
    rf"({SIZE}) already allocated; ({SIZE}) free; (?:({SIZE}) allowed; )?({SIZE}) "
    r"(reserved in total by PyTorch|cached)\)"
)
OOM_RAW = re.compile(
    r"CUDA error: out of memory|CUBLAS_STATUS_ALLOC_FAILED|cudaErrorMemoryAllocation"
    r"|CUDA_ERROR_OUT_OF_MEMORY"
)
OOM_ANY = re.compile(r"CUDA out of memory")
_OOM_PROCESS = re.compile(rf"Process (\d+) has ({SIZE}) memory in use")
_OOM_ALLOWED = re.compile(rf"({SIZE}) allowed;")
_OOM_SELF = re.compile(rf"this process has ({SIZE}) memory in use")
_OOM_SPLIT = re.compile(
    rf"Of the allocated memory ({SIZE}) is allocated by PyTorch, (?:with ({SIZE}) allocated in "
    rf"private pools \(e\.g\., CUDA Graphs\), )?and ({SIZE}) is reserved by PyTorch but unallocated"
)


NEEDLES = (
    "out of memory",
    "CUBLAS_STATUS_ALLOC_FAILED",
    "cudaErrorMemoryAllocation",
    "CUDA_ERROR_OUT_OF_MEMORY",
)


@signature(
    id="cuda-oom",
    title="CUDA out of memory",
    order=40,
    needles=NEEDLES,
    patterns=(OOM_NEW, OOM_OLD, OOM_RAW, OOM_ANY),
)
def build(scan: Scan) -> Built | None:
    if not scan.hits:
        return None
    detailed = [hit for hit in scan.hits if hit.pattern in (0, 1)]
    hit = (detailed or list(scan.hits))[-1]
    m = hit.match
    evidence = [cite(hit.text)]
    fix: list[str] = []
    gpu = "?"
    fragmented = False
    others: list[tuple[str, str]] = []
    if hit.pattern in (0, 1):
        requested, gpu, total = to_bytes(m[1]), m[2], to_bytes(m[3])
        if hit.pattern == 0:
            free = to_bytes(m[4])
            split = _OOM_SPLIT.search(hit.text)
            allocated = to_bytes(split[1]) if split else None
            pools = to_bytes(split[2]) if split else None
            unallocated = to_bytes(split[3]) if split else None
            others = _OOM_PROCESS.findall(hit.text)
            mine = _OOM_SELF.search(hit.text)
        else:
            allocated, free, pools, mine = to_bytes(m[4]), to_bytes(m[5]), None, None
            reserved = to_bytes(m[7])
            if m[8] == "cached" or reserved is None or allocated is None:
                unallocated = reserved  # torch < 1.5 printed the cached-but-unused amount
            else:
                unallocated = max(reserved - allocated, 0.0)
        if requested is not None and free is not None and total is not None:
            evidence.append(
                f"GPU {gpu}: requested {fmt_bytes(requested)} with {fmt_bytes(free)} free of {fmt_bytes(total)}"
            )
        if allocated is not None and unallocated is not None:
            evidence.append(
                f"PyTorch held {fmt_bytes(allocated)} in tensors and {fmt_bytes(unallocated)} reserved but "
                "unallocated (cached)"
            )
        if mine:
            evidence.append(f"this process used {mine[1]} on the GPU in all")
        allowed = _OOM_ALLOWED.search(hit.text)
        if allowed:
            evidence.append(
                f"the process was capped at {allowed[1]} "
                "(`torch.cuda.set_per_process_memory_fraction`)"
            )
        if pools:
            evidence.append(f"{fmt_bytes(pools)} sat in private pools (CUDA Graphs)")
        for pid, size in others:
            evidence.append(
                f"process {pid} also held {size} on GPU {gpu} (another job, or this one seen "
                "under its host PID inside a container)"
            )
        if requested is not None and unallocated is not None:
            fragmented = unallocated > 0 and unallocated >= requested
            if fragmented:
                evidence.append(
                    f"fragmentation: the cache held {fmt_bytes(unallocated)} unused, at least the "
                    f"{fmt_bytes(requested)} requested, but in pieces too small for it"
                )
            else:
                evidence.append(
                    f"not fragmentation: the {fmt_bytes(requested)} requested is more than the "
                    f"{fmt_bytes(unallocated)} cached — the step needs more memory than is left"
                )
        if requested is not None and total is not None and requested > total:
            evidence.append(
                f"one allocation ({fmt_bytes(requested)}) is larger than the whole GPU ({fmt_bytes(total)})"
            )
    else:
        evidence.append("the CUDA driver or a CUDA library could not allocate device memory")
    if fragmented:
        fix.append(
            "Set `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` in the job's environment "
            "(before CUDA starts) so the allocator can grow segments instead of splitting them; "
            "torch builds without it: `PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128`"
        )
    fix.append(
        "Lower the per-step batch size (e.g. halve it) and keep the effective batch with "
        "gradient accumulation"
    )
    fix.append(
        "Mixed precision: run the forward pass under "
        '`torch.autocast(device_type="cuda", dtype=torch.bfloat16)` (activations take about half)'
    )
    fix.append(
        "Activation checkpointing on the largest blocks: "
        "`torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)`"
    )
    if others:
        fix.append(
            f"Free GPU {gpu} from other processes (`nvidia-smi`) or pick another GPU with "
            "`CUDA_VISIBLE_DEVICES`"
        )
    frame = code_where(scan.doc, hit)
    title = f"CUDA out of memory on GPU {gpu}" if gpu != "?" else "CUDA out of memory"
    if fragmented:
        title += " (fragmentation)"
    return (
        make_finding("cuda-oom", "error", title, evidence, fix, frame.where if frame else None),
        (hit,),
    )
