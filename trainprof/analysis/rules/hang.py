"""Hang: the job stopped making progress after its first optimizer step (or made none within
``--timeout``). The runner keeps py-spy dumps of the main process and every DataLoader worker,
and the verdict tells the stories apart: workers alive but blocked in user code (quoting the
line), a worker that died or cannot send, or the main process itself blocked. Start-up work
before the first optimizer step (torch.compile, CUDA context, cudnn autotuning, a cache fill)
is progress, never a hang: only ``--timeout`` bounds it. A silence the runner only reported,
after which the job went on or exited 0, is said as a pause (information), not a hang. In a
job of ranks the story is the ranks' (never torchrun's agent's, which waits above them): ranks
stopped at different lines, each waiting where the others never come (a rank outside the
collective the others are in; one rank alone in a DDP-wrapped model's forward, whose buffer
broadcast the others never join).

Under ``trainprof attach`` (no probe, no step count) a hang is what the stacks and counters show
over the window sampled: the main thread of every sampled process (the training process, other
ranks, DataLoader workers) held one stack, and the job read, wrote and allocated next to
nothing. A job that works moves one or another: its stacks change, it reads and writes (a long
download, a checkpoint), or its memory grows or shrinks (one native call filling a buffer). Still but using CPUs, it is said as stuck (a warning): a spin-wait, or one long
native call.

Anti-pattern::

    def __getitem__(self, i):
        shard = self.shards[i // 1000].wait()   # waits for a download that never comes

Best practice::

    def __getitem__(self, i):
        shard = self.shards[i // 1000].wait(timeout=60) or fail(f"shard {i // 1000} missing")
"""

from __future__ import annotations

from trainprof.analysis.rules.registry import Threshold, define
from trainprof.limits import HANG_SILENCE_S, HANG_STEP_MULTIPLE, MOVED_BYTES

SILENCE_S = Threshold("silence", HANG_SILENCE_S, "s", "no optimizer step for this long (at least)")
STEP_MULTIPLE = Threshold(
    "step_multiple", HANG_STEP_MULTIPLE, "ratio", "or this many median steps, if longer"
)
MOVED = Threshold(
    "moved",
    float(MOVED_BYTES),
    "bytes",
    "read or written (or, under attach, memory taken or given back) by the job's processes "
    "while their stacks kept still: at work, not hung",
)
ATTACH_STILL_S = Threshold(
    "attach_still",
    5.0,
    "s",
    "attach: a window at least this long in which every sampled process held one stack",
)
ATTACH_HELD = Threshold(
    "attach_held", 0.95, "share", "attach: held one stack for this share of its sampled time"
)
ATTACH_BUSY = Threshold(
    "attach_busy",
    0.5,
    "count",
    "attach: still, but its processes used this many CPUs: stuck busy (warning), not blocked",
)

define(
    id="hang",
    examples=("hang_worker_blocked", "dist_eval_hang"),
    title="Hang",
    family="hang",
    per_rank=False,
    severity="error",
    needs=(),
    claims=(),
    thresholds=(SILENCE_S, STEP_MULTIPLE, MOVED, ATTACH_STILL_S, ATTACH_HELD, ATTACH_BUSY),
    check=None,
    doc=__doc__ or "",
)
