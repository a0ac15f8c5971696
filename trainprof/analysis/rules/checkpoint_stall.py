"""Checkpoint stall: checkpoint saves (``torch.save``, safetensors, Lightning's) block training.

Seed 002: saving the full model and optimizer state every few steps took longer than the
steps themselves; training waits for each write.

Anti-pattern::

    if step % 20 == 0:
        torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, f"ckpt-{step}.pt")

Best practice::

    if time.monotonic() - last_save > 600:  # by time, not steps; keep the last few
        torch.distributed.checkpoint.async_save(state, checkpoint_id=path)
"""

from __future__ import annotations

from trainprof.analysis import frameworks
from trainprof.analysis.attribution import dominant_user_frame, save_caller, where
from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._common import interval, ms
from trainprof.analysis.rules.registry import FROM_STACKS, Threshold, rule
from trainprof.analysis.stats import rising
from trainprof.units import plural

SHARE = Threshold("share", 0.03, "share", "share of the steady run inside checkpoint saves")
FIX = (
    "save less often (every N minutes, or only at the end of an epoch)",
    "skip optimizer state when you will not resume; keep only the last N checkpoints",
    "save asynchronously: torch.distributed.checkpoint.async_save, or copy the "
    "state_dict to CPU and write it from a background thread",
)


@rule(
    id="checkpoint-stall",
    examples=("checkpoint_stall",),
    title="Checkpoint stall",
    family="stalls",
    needs=("steps",),
    or_from=FROM_STACKS,
    claims=("save",),
    thresholds=(SHARE,),
    settings=frameworks.settings("save_every"),
)
def check(m: Metrics) -> Finding | None:
    if m.basis.by_stacks:
        return _from_stacks(m)
    led = m.ledger
    w = m.activity.window
    if led is None or w is None:
        return None
    inside = [
        (seg, b, path) for seg, b, path in m.activity.saves if seg.t1 > w[0] and seg.t0 < w[1]
    ]
    share = led.share("save")
    if not inside or share < SHARE.value:
        return None
    cost = led.get("save")
    sizes = [b for _s, b, _p in inside if b >= 0]
    segs = [seg for seg, _b, _p in inside]
    at = _where(m, [(s.t0, s.t1) for s in segs])
    size = _sizes(sizes)
    return Finding(
        id="checkpoint-stall",
        severity="warning",
        title=f"Checkpoint saves block training: {share:.0%} of the run saving",
        evidence=(
            f"{plural(len(inside), 'checkpoint save')}, {ms(cost / len(inside))} each{size}, "
            f"{interval(m, segs)}",
            f"{cost:.2f} s in all, {share:.0%} of the steady run; training waits for each save",
            f"last saved to {inside[-1][2]}",
            *_growing(sizes, [s.t1 - s.t0 for s in segs]),
        ),
        fix=FIX,
        where=at,
    )


def _where(m: Metrics, windows: list[tuple[float, float]]) -> str | None:
    """The user's line that calls the checkpoint writer (the function that saves: a whole
    ``save_checkpoint`` is the checkpoint's cost); without the writer in the stacks, the user's
    line that held the saves longest."""
    frame = save_caller(m.activity.spans, windows)
    return where(frame or dominant_user_frame(m.activity.spans, windows))


def _growing(sizes: list[int], seconds: list[float]) -> tuple[str, ...]:
    """Saves that grow along the run, in size or else in time: what the checkpoint holds grows."""
    by_size = rising([float(b) for b in sizes]) if len(sizes) == len(seconds) else None
    if by_size is not None:
        grew = f"is larger than the last: {by_size[0] / 2**20:.1f} MiB at first, "
        grew += f"{by_size[1] / 2**20:.1f} MiB at the end"
    elif (by_time := rising(seconds)) is not None:
        grew = f"takes longer than the last: {ms(by_time[0])} at first, {ms(by_time[1])} at the end"
    else:
        return ()
    return (
        f"each save {grew}; something the checkpoint "
        "holds grows every step (a history, a buffer or a list kept in the saved state); keep "
        "it out of the checkpoint, or bound it",
    )


def _sizes(sizes: list[int]) -> str:
    """ ", 24.7 MiB each", or the range where a checkpoint is several files of different sizes
    (a Trainer's weights, then its optimizer state)."""
    if not sizes:
        return ""
    lo, hi = min(sizes) / 2**20, max(sizes) / 2**20
    if f"{lo:.1f}" == f"{hi:.1f}":
        return f", {hi:.1f} MiB each"
    return f", {lo:.1f}–{hi:.1f} MiB each"


def _from_stacks(m: Metrics) -> Finding | None:
    """The saves as stack samples alone saw them: runs of stacks inside a save call."""
    led = m.ledger
    assert led is not None
    saves = [seg for seg, _b, _p in m.activity.saves]
    share = led.share("save")
    if not saves or share < SHARE.value:
        return None
    cost = led.get("save")
    at = _where(m, [(s.t0, s.t1) for s in saves])
    gaps = [b.t0 - a.t0 for a, b in zip(saves, saves[1:], strict=False)]
    every = f", every {sum(gaps) / len(gaps):.1f} s" if gaps else ""
    return Finding(
        id="checkpoint-stall",
        severity="warning",
        title=f"Checkpoint saves block training: {share:.0%} of the time saving",
        evidence=(
            "checkpoint saves (torch.save, safetensors) held the main thread "
            f"{cost:.2f} s, {share:.0%} of {m.basis.sampled}",
            f"{plural(len(saves), 'save')} seen, {ms(cost / len(saves))} each{every}; "
            "training waits for each save",
        ),
        fix=FIX,
        where=at,
    )
