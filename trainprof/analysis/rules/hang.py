"""Hang: the job stopped making progress after its first optimizer step (or made none within
``--timeout``). The runner keeps py-spy dumps of the main process and every DataLoader worker,
and the verdict tells the stories apart: workers alive but blocked in user code (quoting the
line), a worker that died or cannot send, or the main process itself blocked. Start-up work
before the first optimizer step (torch.compile, CUDA context, cudnn autotuning, a cache fill)
is progress, never a hang: only ``--timeout`` bounds it. A silence the runner only reported,
after which the job went on or exited 0, is said as a pause (information), not a hang.

Anti-pattern::

    def __getitem__(self, i):
        shard = self.shards[i // 1000].wait()   # waits for a download that never comes

Best practice::

    def __getitem__(self, i):
        shard = self.shards[i // 1000].wait(timeout=60) or fail(f"shard {i // 1000} missing")
"""

from __future__ import annotations

from trainprof.analysis.rules.registry import Threshold, define

SILENCE_S = Threshold("silence", 10.0, "s", "no optimizer step for this long (at least)")
STEP_MULTIPLE = Threshold("step_multiple", 20.0, "ratio", "or this many median steps, if longer")

define(
    id="hang",
    title="Hang",
    family="hang",
    severity="error",
    needs=(),
    claims=(),
    thresholds=(SILENCE_S, STEP_MULTIPLE),
    check=None,
    doc=__doc__ or "",
)
