"""Pageable memory: batches are copied to the GPU from pageable host memory.

Anti-pattern::

    loader = DataLoader(dataset, batch_size=64, num_workers=4)
    x = x.to("cuda")

Best practice::

    loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
    x = x.to("cuda", non_blocking=True)
"""

from __future__ import annotations

from trainprof.analysis import frameworks
from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._common import primary_loader
from trainprof.analysis.rules.registry import rule


@rule(
    id="pageable-memory",
    title="Pageable memory",
    family="gpu",
    needs=("steps", "cuda", "loader"),
    settings=frameworks.settings("pin_memory"),
)
def check(m: Metrics) -> Finding | None:
    loader = primary_loader(m)
    if loader is None or loader.config.get("pin_memory"):
        return None
    return Finding(
        id="pageable-memory",
        severity="warning",
        title="Batches are copied to the GPU from pageable host memory",
        evidence=(
            "the model trains on CUDA and the DataLoader has pin_memory=False: every host→device "
            "copy is staged through a pinned buffer and cannot overlap with compute",
        ),
        fix=("DataLoader(..., pin_memory=True) and batch.to(device, non_blocking=True)",),
    )
