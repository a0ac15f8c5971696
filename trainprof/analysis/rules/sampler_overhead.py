"""Sampler overhead: the sampler's ``__iter__`` does real work in the main process.

The sampler runs in the main process even with ``num_workers > 0``, so workers cannot hide its
cost (seed 004: a P×K sampler decoded samples to learn their modality, every batch).

Anti-pattern::

    class PKSampler(Sampler):
        def __iter__(self):
            for _ in range(len(self)):
                yield [i for i in candidates if modality(load(i)) == m][:k]

Best practice::

    class PKSampler(Sampler):
        def __init__(self, dataset):
            self.by_modality = precompute_modalities(dataset)  # once
        def __iter__(self):
            ...  # index arithmetic only
"""

from __future__ import annotations

from collections import Counter

from trainprof.analysis.attribution import is_user_file, overlaps, short_name, where
from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._common import GPU_BUSY, host_time_is_free, ms, primary_loader
from trainprof.analysis.rules.registry import FROM_STACKS, Threshold, rule
from trainprof.store.stacks import Frame

SHARE = Threshold("share", 0.10, "share", "share of steady time inside the main-process sampler")


@rule(
    id="sampler-overhead",
    examples=("sampler_overhead",),
    title="Sampler overhead",
    family="input",
    costs="host",
    needs=("steps", "loader"),
    or_from=FROM_STACKS,
    claims=("sampler",),
    thresholds=(SHARE, GPU_BUSY),
)
def check(m: Metrics) -> Finding | None:
    if m.basis.by_stacks:
        return _from_stacks(m)
    s, led = m.steady, m.ledger
    assert s is not None and led is not None
    if host_time_is_free(m):
        return None
    share = led.share("sampler")
    if share < SHARE.value:
        return None
    loader = primary_loader(m)
    cfg = loader.config if loader else {}
    cls = cfg.get("batch_sampler") if cfg.get("batch_size") is None else cfg.get("sampler")
    cls = cls or cfg.get("batch_sampler") or cfg.get("sampler")
    per_batch = led.get("sampler") / max(1.0, s.count * s.fetches_per_step)
    evidence = (
        f"{ms(per_batch)} per batch inside {cls}.__iter__ (DataLoader._next_index), "
        f"{share:.0%} of steady step time",
        RUNS_IN_MAIN,
    )
    return finding(share, evidence, sampler_frames(m))


RUNS_IN_MAIN = (
    "the sampler runs in the main process even with num_workers > 0, so workers cannot hide "
    "its cost"
)


def sampler_frames(m: Metrics) -> tuple[Frame | None, Frame | None]:
    """(the sampler's own method that the DataLoader called, the user's line under it that held
    the main thread longest), from the stacks under ``_next_index``: the first names the
    sampler to change, the second where its time goes (a tokenizer it calls, say)."""
    if m.activity.window is None:
        return None, None
    entry: Counter[Frame] = Counter()
    hot: Counter[Frame] = Counter()
    for span, seconds in overlaps(m.activity.spans, [m.activity.window]):
        names = [short_name(f[0]) for f in span.frames]
        if "_next_index" not in names:
            continue
        below = span.frames[names.index("_next_index") + 1 :]
        mine = [f for f in below if is_user_file(f[1])]
        if mine:
            entry[mine[0]] += int(seconds * 1e6)
            hot[mine[-1]] += int(seconds * 1e6)
    return (
        entry.most_common(1)[0][0] if entry else None,
        hot.most_common(1)[0][0] if hot else None,
    )


def finding(
    share: float, evidence: tuple[str, ...], frames: tuple[Frame | None, Frame | None]
) -> Finding:
    """The finding, whether the batches were counted or only their stacks seen."""
    entry, hot = frames
    return Finding(
        id="sampler-overhead",
        severity="warning",
        title=f"The sampler takes {share:.0%} of step time in the main process",
        evidence=evidence,
        fix=(
            "precompute per-sample metadata (lengths, modality, labels) once in the sampler's "
            "__init__ and cache it; index arrays instead of re-reading samples every batch",
            "keep __iter__ to cheap index arithmetic (torch.randperm, list slicing)",
        ),
        where=where(entry or hot),
        hotspot=where(hot) if hot is not None and hot != entry else None,
    )


def _from_stacks(m: Metrics) -> Finding | None:
    """From the stacks alone: the share of the time in the sampler's ``__iter__`` (per batch
    needs the batches counted, which the probe does)."""
    led = m.ledger
    assert led is not None
    share = led.share("sampler")
    if share < SHARE.value or host_time_is_free(m):
        return None
    evidence = (
        f"the main thread ran the sampler (DataLoader._next_index) {share:.0%} of the time "
        f"({m.basis.sampled})",
        RUNS_IN_MAIN,
    )
    return finding(share, evidence, sampler_frames(m))
