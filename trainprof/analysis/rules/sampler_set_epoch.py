"""Sampler set_epoch: a shuffling ``DistributedSampler`` gives every epoch the same order,
because ``sampler.set_epoch(epoch)`` is never called.

``DistributedSampler`` seeds its shuffle with ``seed + epoch``, and its epoch only changes when
the loop calls ``set_epoch``; the DataLoader does not. Without it each rank sees its shard in
the same order every epoch (PyTorch's documentation: "Otherwise, the same ordering will be
always used"), which costs the model the reshuffling that shuffle=True promised; nothing
crashes and nothing is slower, so no profiler shows it. The probe reads the sampler's epoch as
each pass over the loader starts.

Anti-pattern::

    sampler = DistributedSampler(dataset, shuffle=True)
    loader = DataLoader(dataset, batch_size=64, sampler=sampler)
    for epoch in range(epochs):
        for x, y in loader:          # the same order every epoch
            ...

Best practice::

    for epoch in range(epochs):
        sampler.set_epoch(epoch)     # before iterating: a new order each epoch
        for x, y in loader:
            ...
"""

from __future__ import annotations

from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._common import loader_caller
from trainprof.analysis.rules.registry import rule


@rule(
    id="sampler-set-epoch",
    examples=("dist_same_shuffle",),
    title="Same shuffle every epoch",
    family="input",
    harm="results",
    needs=("loader",),
)
def check(m: Metrics) -> Finding | None:
    for loader in m.loaders:
        epochs = loader.sampler_epochs
        if len(epochs) < 2 or len(set(epochs)) > 1:
            continue
        name = str(loader.config.get("sampler") or "the sampler").rsplit(".", 1)[-1]
        return Finding(
            id="sampler-set-epoch",
            severity="warning",
            title=(
                f"{name} shuffles every epoch the same way: set_epoch() is never called "
                f"({len(epochs)} passes over the data, all at epoch {epochs[0]})"
            ),
            evidence=(
                f"{len(epochs)} passes over the dataset started with a {name}(shuffle=True) at "
                f"epoch {epochs[0]} each time (one DataLoader, or one built anew each epoch): it "
                "seeds its order with seed + epoch, so every pass read the samples in the same "
                "order (on every rank)",
            ),
            fix=(
                "call sampler.set_epoch(epoch) at the start of each epoch, before iterating the "
                "DataLoader",
            ),
            where=loader_caller(m),
        )
    return None
