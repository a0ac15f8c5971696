"""What bounds a CPU job's step, from the steady time ledger: a CPU it waited for
(``cpu-starved``: other processes, a quota or its own threads took it), the model's own math
(``compute-bound``), its data (``input-bound``), other host work (``host-bound``), or no one
of them (``mixed``). Pure."""

from __future__ import annotations

from trainprof.analysis.cpu_starvation import CpuStarvation
from trainprof.analysis.device import HOST_WORK_NAMES, Bottleneck
from trainprof.analysis.ledger import DATA, Ledger

COMPUTE = ("forward", "backward", "optimizer")
HOST_WORK = tuple(HOST_WORK_NAMES)
# Data or host work bounds the step from this share of the steady time, when twice the other
# (as on a GPU job, and as input-bound's finding judges).
BOUND = 0.2
# The model's forward, backward and optimizer step take at least this share: compute-bound.
COMPUTE_BOUND = 0.5
# The loop's thread waited for a CPU this share of the steady time: that comes first.
STARVED = 0.2
OTHERS_MIN = 0.5  # CPUs other processes must use to be named as what took them


def cpu_bottleneck(led: Ledger, starvation: CpuStarvation | None = None) -> Bottleneck | None:
    """The verdict for a job that trains on the CPU; None where the step's own time was not
    split by stack samples and its data does not bound it (its math is not told apart)."""
    waited = led.share("cpu_wait", "stall_wait")
    if starvation is not None and waited >= STARVED:
        return Bottleneck("cpu-starved", _starved(starvation, waited))
    data, host = led.share(*DATA), led.share(*HOST_WORK)
    if data >= BOUND and data >= 2 * host:
        return Bottleneck("input-bound", f"the loop waited for data {data:.0%} of the steady time")
    if led.step_split != "stack samples":
        return None
    shares = f"data {data:.0%}, other host work {host:.0%}"
    if host >= BOUND and host >= 2 * data:
        top = max(HOST_WORK, key=led.share)
        return Bottleneck(
            "host-bound",
            f"host work in the loop took {host:.0%} of the steady time "
            f"({HOST_WORK_NAMES[top]} {led.share(top):.0%})",
        )
    compute = led.share(*COMPUTE)
    if compute >= COMPUTE_BOUND and data < BOUND and host < BOUND:
        return Bottleneck(
            "compute-bound",
            f"the model's own forward, backward and optimizer step took {compute:.0%} of the "
            f"steady time on the CPU ({shares})",
        )
    return Bottleneck(
        "mixed",
        f"forward, backward and optimizer step {compute:.0%} of the steady time, {shares}",
    )


def _starved(s: CpuStarvation, waited: float) -> str:
    """Who had the CPUs the loop's thread waited for: other processes, the quota, or the job."""
    wait = f"the loop's thread waited for a CPU {waited:.0%} of the steady time"
    others = s.others_on_its_cpus
    if others is not None and others >= OTHERS_MIN:
        return f"{s.got()}; {wait}"
    if s.throttled is not None and s.throttled >= 0.1 and s.quota is not None:
        quota = f"the cgroup's {s.quota:g}-CPU quota stopped the job"
        return f"{quota} in {s.throttled:.0%} of its periods; {wait}"
    return f"{s.got()}, and its own threads compete for them; {wait}"
