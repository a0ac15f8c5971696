"""GPU left unused: the model trains on the CPU while the machine has an NVIDIA GPU that sits
idle (the model and its batches were never moved to it, or torch is a CPU-only build).

Read at the first optimizer step (the parameters' device, the CUDA version torch was built for,
``CUDA_VISIBLE_DEVICES``) and from NVML, outside the job (each GPU's utilization). A GPU busy
with another job, or hidden on purpose (``CUDA_VISIBLE_DEVICES=""``), is not flagged.

Anti-pattern::

    model = Net()                        # stays on the CPU
    for x, y in loader:
        loss = loss_fn(model(x), y)

Best practice::

    device = torch.device("cuda")
    model = Net().to(device)
    for x, y in loader:                  # DataLoader(..., pin_memory=True)
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        loss = loss_fn(model(x), y)
"""

from __future__ import annotations

from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules.registry import Threshold, rule

IDLE_UTIL = Threshold("idle_util", 10.0, "%", "a GPU counts as unused below this mean utilization")
HIDDEN = ("", "-1", "NoDevFiles")  # CUDA_VISIBLE_DEVICES values that hide every GPU
# The ledger buckets a GPU would run ("step": the whole step where no stacks split it).
COMPUTE = ("forward", "backward", "optimizer", "step")


@rule(
    id="gpu-unused",
    examples=("gpu_forgot_device",),
    title="GPU left unused",
    family="gpu",
    needs=("steps", "machine_gpus"),
    thresholds=(IDLE_UTIL,),
)
def check(m: Metrics) -> Finding | None:
    p = m.activity.precision or {}
    if p.get("device") != "cpu" or p.get("cuda_visible_devices") in HIDDEN:
        return None
    idle = [(i, u) for i, u in m.machine_gpus if u is not None and u < IDLE_UTIL.value]
    if not idle:
        return None  # every GPU is busy with another job: the CPU may be a choice
    gpus = ", ".join(f"GPU {i} ({u:.0f}% utilized)" for i, u in idle)
    evidence = [
        f"the model's parameters are on the CPU ({p.get('dtype', '?')}), while NVML shows "
        f"{gpus} on this machine"
    ]
    if m.ledger is not None:
        compute = m.ledger.share(*COMPUTE)
        what = (
            "forward, backward and the optimizer take"
            if m.ledger.step_split == "stack samples"
            else "the step (its loop code too: not split by stack samples) takes"
        )
        evidence.append(
            f"{what} {compute:.0%} of the steady time on the CPU: the work a GPU would take "
            "over (its speed-up is not measured here)"
        )
    build = p.get("cuda_build")
    fix: tuple[str, ...]
    if build:
        evidence.append(f"torch {p.get('torch', '?')} is built for CUDA {build}")
        fix = (
            'device = torch.device("cuda"); model.to(device) before building the optimizer',
            "move each batch: x.to(device, non_blocking=True) (DataLoader(..., pin_memory=True))",
            'if the CPU is on purpose, hide the GPUs: CUDA_VISIBLE_DEVICES="" (this goes away)',
        )
    else:
        evidence.append(f"torch {p.get('torch', '?')} is a CPU-only build: it cannot use a GPU")
        fix = (
            "install a CUDA build of torch for this driver (`trainprof doctor` names the CUDA "
            "version it supports), then model.to('cuda') and move each batch",
        )
    return Finding(
        id="gpu-unused",
        severity="warning",
        title="Training runs on the CPU while this machine's GPU sits idle",
        evidence=tuple(evidence),
        fix=fix,
    )
