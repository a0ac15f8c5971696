"""A torchrun rank failed; the others' errors are consequences.

When one rank of a torchrun job fails, the others fail because of it: a gloo "Connection closed
by peer", an NCCL watchdog timeout, a reset connection, torchrun's SIGTERM. The cause is the rank
whose own error is none of these, the first by time; it is read from torchrun's failure report,
each rank's exception as the probe recorded it, and each rank's traceback in the job's output
(``analysis/crash/torchrun.py``).

Anti-pattern::

    rank 1 raises; rank 0 reports 'Connection closed by peer' in its all-reduce

Best practice::

    fix the failed rank's own error; @record (torch.distributed.elastic) names it
"""

from __future__ import annotations

from trainprof.analysis.rules.registry import define

define(
    id="rank-failed",
    examples=("dist_rank_fails",),
    title="A torchrun rank failed; the others' errors are consequences",
    family="crash",
    per_rank=False,
    severity="error",
    needs=("stderr",),
    claims=(),
    thresholds=(),
    check=None,
    doc=__doc__ or "",
)
