"""Crashes: the job's output is matched against the crash signature table
(``analysis/crash/table.py``) once, and each row's finding takes the same path as every rule's
(ranked, rendered, gated the same way). This module is their reference: one entry per row.

Anti-pattern::

    see each entry

Best practice::

    see each entry
"""

from __future__ import annotations

from trainprof.analysis.rules.registry import define

# id → (title, anti-pattern, best practice): the reference `trainprof rules` shows.
_CRASHES: dict[str, tuple[str, str, str]] = {
    "ragged-batch": (
        "Samples of different sizes break default_collate",
        "DataLoader(clips_of_varying_length, batch_size=8)",
        "DataLoader(..., collate_fn=lambda b: pad_sequence(b, batch_first=True))",
    ),
    "collate-structure": (
        "A custom collate_fn returns or indexes the wrong structure",
        "collate_fn=lambda batch: batch[0]['x']  # a list of dicts, indexed as one dict",
        "collate_fn=lambda batch: {k: torch.stack([b[k] for b in batch]) for k in batch[0]}",
    ),
    "shape-mismatch": (
        "A tensor shape does not match what the code expects",
        "torch.cat([labels, extra], dim=2)  # labels are 2-D",
        "assert labels.dim() == 3, labels.shape  # check shapes where they are built",
    ),
    "cuda-oom": (
        "CUDA out of memory",
        "DataLoader(dataset, batch_size=512)  # activations do not fit",
        "smaller batch + gradient accumulation, torch.autocast, activation checkpointing",
    ),
    "worker-shm-limit": (
        "DataLoader workers run out of shared memory (/dev/shm)",
        "docker run ...  # default 64 MiB /dev/shm, num_workers=8",
        "docker run --shm-size=8g ...  (or --ipc=host)",
    ),
    "worker-fd-limit": (
        "DataLoader workers hit the open-file limit",
        "ulimit -n 1024 with the file_descriptor sharing strategy",
        "ulimit -n 65536, or torch.multiprocessing.set_sharing_strategy('file_system')",
    ),
    "worker-killed": (
        "A DataLoader worker was killed",
        "a worker caching the dataset in memory until the OOM killer takes it",
        "bounded caches, fewer workers, more memory; read the kernel log (dmesg)",
    ),
    "host-oom": (
        "The job ran out of host memory: an allocation refused, or the kernel's OOM killer",
        "the whole dataset loaded into RAM in every worker; a (N, 1) - (N,) broadcast that "
        "asks for N x N",
        "memory-map the data (numpy.memmap), load lazily in __getitem__; shapes that match",
    ),
    "worker-reset": (
        "A DataLoader worker's connection was reset",
        "a worker dying mid-epoch leaves the others' queues broken",
        "find the first error above (the worker's own); DataLoader(num_workers=0) shows it",
    ),
    "rank-failed": (
        "A torchrun rank failed; the others' errors are consequences",
        "rank 1 raises; rank 0 reports 'Connection closed by peer' in its all-reduce",
        "fix the failed rank's own error; @record (torch.distributed.elastic) names it",
    ),
}

for _id, (_title, _anti, _best) in _CRASHES.items():
    define(
        id=_id,
        title=_title,
        family="crash",
        per_rank=False,
        severity="error",
        needs=("stderr",),
        claims=(),
        thresholds=(),
        check=None,
        doc=(f"{_title}.\n\nAnti-pattern::\n\n    {_anti}\n\nBest practice::\n\n    {_best}\n"),
    )
