"""Accumulation all-reduce: gradient accumulation under DDP all-reduces the gradients after every
micro-batch's ``backward()``, where only the last one of a step needs it.

DDP all-reduces in every backward unless it runs inside ``model.no_sync()``. A loop that
accumulates ``k`` micro-batches per optimizer step pays ``k`` all-reduces of the whole gradient
for one update: ``k - 1`` of them are thrown away by the next one's sum. The probe counts the
backward passes in which a DDP model would all-reduce (``require_backward_grad_sync``), and
measures what each rank waited at the end of them for the all-reduce (gloo, on the host); with
NCCL the all-reduce runs on the GPU's streams and its time is not measured on the host.

Anti-pattern::

    for i, (x, y) in enumerate(loader):
        (loss_fn(ddp_model(x), y) / accum).backward()    # all-reduces every micro-batch
        if (i + 1) % accum == 0:
            opt.step(); opt.zero_grad()

Best practice::

    sync = (i + 1) % accum == 0
    with contextlib.nullcontext() if sync else ddp_model.no_sync():
        (loss_fn(ddp_model(x), y) / accum).backward()   # all-reduces only on the last one
"""

from __future__ import annotations

from trainprof.analysis.attribution import backward_caller, where
from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics, batches_per_step
from trainprof.analysis.ranks import unmeasured_reason
from trainprof.analysis.rules._common import ms
from trainprof.analysis.rules.registry import Threshold, rule

SYNCS = Threshold(
    "syncs",
    1.5,
    "count",
    "all-reducing backward passes per optimizer step, in a step of 2 or more batches",
)
SHARE = Threshold(
    "share",
    0.05,
    "share",
    "a warning where the avoidable all-reduce wait is at least this share of the steady time "
    "(else, or not measured, info)",
)


@rule(
    id="accumulation-allreduce",
    examples=("dist_accumulation",),
    title="All-reduce every micro-batch",
    family="distributed",
    needs=("steps", "ranks"),
    claims=("backward", "step"),
    thresholds=(SYNCS, SHARE),
)
def check(m: Metrics) -> Finding | None:
    batches = batches_per_step(m)
    primary = next((r for r in m.activity.ranks if r.primary), None)
    if batches is None or batches < 2 or primary is None or primary.syncs_per_step is None:
        return None
    syncs = primary.syncs_per_step
    if syncs < SYNCS.value:
        return None
    # Both counts are read off counters written every 0.25 s, so a window's edges blur them
    # alike: their ratio is exact where every backward all-reduces (3.9 a step read as 4 of 4).
    backwards = primary.backwards_per_step or syncs
    per_step = max(1, round(backwards))
    n = min(per_step, round(per_step * min(1.0, syncs / backwards)))
    evidence = [
        f"each optimizer step takes {batches} DataLoader batches and {per_step} backward "
        f"passes; DDP all-reduced the gradients in {n} of them"
        + (": every micro-batch" if n == per_step else "")
        + ", where only the step's last needs it (the others could run inside "
        "model.no_sync())",
    ]
    avoidable = (n - 1) / n
    led = m.ledger
    share = None
    wait = primary.ddp_per_step_s
    if wait is not None and primary.step_s > 0:
        share = wait * avoidable / primary.step_s
        evidence.append(
            f"rank {primary.rank} waited {ms(wait)} per step for those all-reduces at the end "
            f"of backward(): {ms(wait * avoidable)} of it ({share:.0%} of the step) for the "
            f"{n - 1} not needed (their transfer overlapped with backward is not counted: more "
            "could be saved)"
        )
    else:
        evidence.append(
            f"the all-reduce's time was not measured ({unmeasured_reason(m.activity.ranks)}): "
            f"it moves the whole gradient {n} times per step instead of once"
        )
    wants: tuple[tuple[str, float], ...] = (("backward", 0.0),)  # not measured: no time
    if share is not None and led is not None and led.window_s > 0:
        bucket = "backward" if led.seconds.get("backward", 0.0) > 0 else "step"
        have = led.seconds.get(bucket, 0.0)
        if have > 0:
            wants = ((bucket, min(1.0, share * led.window_s / have)),)
    window = m.activity.window
    line = backward_caller(m.activity.spans, window) if window else None
    return Finding(
        id="accumulation-allreduce",
        severity="warning" if share is not None and share >= SHARE.value else "info",
        title=(
            f"Gradients are all-reduced after every micro-batch ({n} times per optimizer "
            f"step of {batches} batches)"
            if n == per_step
            else f"Gradients are all-reduced {n} times per optimizer step of {batches} batches"
        ),
        evidence=tuple(evidence),
        fix=(
            "run the backward passes of all but the last micro-batch of a step inside "
            "model.no_sync(): `with model.no_sync() if (i + 1) % accum else "
            "contextlib.nullcontext(): loss.backward()`",
            "Hugging Face Accelerate does it for you: accelerator.accumulate(model) around the "
            "micro-batch; Lightning's accumulate_grad_batches does too",
        ),
        where=where(line),
        wants=wants,
    )
