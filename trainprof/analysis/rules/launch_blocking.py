"""CUDA_LAUNCH_BLOCKING: the job runs with every CUDA kernel launch made synchronous.

``CUDA_LAUNCH_BLOCKING=1`` is a debugging switch: each kernel launch waits until the kernel
has run, so a CUDA error is raised at the line that launched the failing kernel. While it is
set the host never queues work ahead of the GPU: the GPU idles through the Python, dispatch and
launch time of every op, and a GPU-bound job becomes launch-bound. It is easy to leave behind
in a launch script, a shell profile or a container's environment, where the code does not show
it.

The job's environment is read by the probe at the first optimizer step; what unsetting it
gains is not measured (the GPU's idle share is the evidence).

Anti-pattern::

    # run.sh, from the day a kernel crashed
    export CUDA_LAUNCH_BLOCKING=1
    python train.py

Best practice::

    python train.py                            # launches stay asynchronous
    CUDA_LAUNCH_BLOCKING=1 python train.py     # only to find the kernel behind a CUDA error
"""

from __future__ import annotations

from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules.registry import rule


@rule(
    id="launch-blocking",
    title="Synchronous kernel launches",
    family="gpu",
    harm="debug",
    needs=("cuda", "debug"),
)
def check(m: Metrics) -> Finding | None:
    debug = m.activity.debug
    if debug is None or not debug.launch_blocking_on:
        return None
    evidence = [
        f"CUDA_LAUNCH_BLOCKING={debug.launch_blocking} in the job's environment: every CUDA "
        "kernel launch waits until the kernel has run, so the host cannot queue work ahead of "
        "the GPU",
    ]
    if m.device is not None and m.device.idle_share is not None:
        evidence.append(f"the GPU sat idle {m.device.idle_share:.0%} of each step (its own clock)")
    elif m.gpu_util_mean is not None:
        evidence.append(f"the GPU was {m.gpu_util_mean:.0f}% utilized (NVML)")
    evidence.append("what unsetting it gains is not measured")
    return Finding(
        id="launch-blocking",
        severity="warning",
        title="CUDA_LAUNCH_BLOCKING is set: every kernel launch waits for the GPU",
        evidence=tuple(evidence),
        fix=(
            "unset CUDA_LAUNCH_BLOCKING for training (look in the launch script, the shell's "
            "profile, the container's environment, and os.environ in the code)",
            "set it only for a run that hunts a CUDA error, to see the kernel that raised it",
        ),
    )
