"""Host syncs: per-step device→host copies (``.item()``, ``.cpu()``) stop the CPU from running
ahead of the GPU.

Each sync waits for every queued kernel. When the GPU is busy almost all the time the wait
costs nothing (the GPU is the bottleneck), so the rule stays quiet there.

Anti-pattern::

    for p in model.parameters():
        norms.append(p.grad.norm().item())   # one sync per parameter, every step

Best practice::

    running_loss += loss.detach()           # stays on the device
    if step % 100 == 0:
        print(running_loss.item() / 100)
"""

from __future__ import annotations

from trainprof.analysis.attribution import where
from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._common import GPU_BUSY, host_time_is_free, loop_time
from trainprof.analysis.rules.registry import Threshold, rule

SHARE = Threshold("share", 0.10, "share", "share of the loop on lines that copy device→host")


@rule(
    id="host-sync",
    examples=("gpu_sync_heavy",),
    title="Host syncs",
    family="gpu",
    costs="host",
    needs=("steps", "cuda", "stacks"),
    claims=("sync",),
    thresholds=(SHARE, GPU_BUSY),
)
def check(m: Metrics) -> Finding | None:
    led = m.ledger
    if led is None or m.activity.window is None:
        return None
    if host_time_is_free(m):
        return None
    loop = loop_time(m)
    share = led.get("sync") / loop if loop > 0 else 0.0
    if share < SHARE.value:
        return None
    return Finding(
        id="host-sync",
        severity="warning",
        title=f"Per-step device→host syncs hold the main thread {share:.0%} of the loop",
        evidence=(
            f"{share:.0%} of main-thread time is on lines calling .item()/.cpu()/.tolist()/"
            ".numpy(): each waits for every queued GPU kernel, so the CPU cannot run ahead",
        ),
        fix=(
            "accumulate metrics on the device (running_loss += loss.detach()) and call .item() "
            "every N steps",
            "find the syncs: torch.cuda.set_sync_debug_mode('warn') for a few steps",
        ),
        where=where(m.activity.loop_profile.top_line("sync") if m.activity.loop_profile else None),
    )
