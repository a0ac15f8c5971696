"""The GPU's side of the steady window, from the probe's timed steps (CUDA events), and the
bottleneck verdict that compares it with the host's. Pure.

A timed step is split on the device clock into forward (with the host→device copy), backward,
optimizer, and the gap before the next step's first kernel. The gap is the GPU idle between
steps: the host was loading data, stalled, or doing loop work, and the GPU had nothing queued.
A step that accumulates gradients over micro-batches has its forward and backward summed over
them, and the GPU's wait for each later micro-batch (``data``) is idle time too.
Inside forward/backward the GPU can be idle too, waiting for the host to launch kernels; NVML's
utilization, sampled from outside, is the cross-check there.

Host time while the GPU is busy costs nothing: on a GPU job the host-side findings together can
cost at most the GPU's idle share, and the verdict names what bounds the step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trainprof.analysis.stats import mean

# gpu-bound: the device is idle less than this share of a step (and NVML agrees, if read).
GPU_BOUND_IDLE = 0.10
GPU_BOUND_UTIL = 80.0


@dataclass(frozen=True)
class DeviceView:
    """Means per timed step in the steady window, seconds on the device (and host) clock."""

    timed_steps: int
    fwd_s: float | None
    bwd_s: float | None
    opt_s: float | None
    gap_s: float | None  # None: no batch mark (a loop without a DataLoader), gap not separable
    host_fwd_s: float | None
    host_bwd_s: float | None
    host_opt_s: float | None
    host_gap_s: float | None
    # The GPU waiting for later micro-batches inside a step (None: one batch a step).
    data_s: float | None
    host_data_s: float | None
    memory: tuple[tuple[float, int], ...]  # (monotonic t, allocated bytes) per timed step
    peak_allocated: int | None
    peak_reserved: int | None

    @property
    def step_s(self) -> float | None:
        parts = (self.fwd_s, self.bwd_s, self.opt_s, self.gap_s, self.data_s)
        return sum(p for p in parts if p is not None) if self.gap_s is not None else None

    @property
    def idle_share(self) -> float | None:
        """The GPU's idle share of a step: between steps, and waiting for micro-batches within
        one (None when not separable)."""
        step = self.step_s
        if step is None or step <= 0 or self.gap_s is None:
            return None
        return min(1.0, (self.gap_s + (self.data_s or 0.0)) / step)

    def to_json(self) -> dict[str, object]:
        def r(v: float | None) -> float | None:
            return None if v is None else round(v, 6)

        return {
            "timed_steps": self.timed_steps,
            "device_s": {
                "forward": r(self.fwd_s),
                "backward": r(self.bwd_s),
                "optimizer": r(self.opt_s),
                "idle_between_steps": r(self.gap_s),
                "data_between_micro_batches": r(self.data_s),
            },
            "host_s": {
                "forward": r(self.host_fwd_s),
                "backward": r(self.host_bwd_s),
                "optimizer": r(self.host_opt_s),
                "between_steps": r(self.host_gap_s),
                "data_between_micro_batches": r(self.host_data_s),
            },
            "idle_share": r(self.idle_share),
            "peak_allocated_bytes": self.peak_allocated,
            "peak_reserved_bytes": self.peak_reserved,
        }


def device_view(
    records: Sequence[tuple[int, ...]], t0: float, window: tuple[float, float]
) -> DeviceView | None:
    """From the probe's ``G`` records (see ``store.events.DEVICE_FIELDS``) inside the window."""
    rows = [r for r in records if window[0] <= t0 + r[0] / 1e6 <= window[1]]
    if not rows:
        return None

    def col(i: int) -> float | None:
        vals = [r[i] / 1e6 for r in rows if r[i] >= 0]
        return mean(vals) if len(vals) * 2 >= len(rows) else None

    alloc = [(t0 + r[0] / 1e6, r[10]) for r in rows if r[10] >= 0]
    peaks = [r[12] for r in rows if r[12] >= 0]
    reserved = [r[11] for r in rows if r[11] >= 0]
    return DeviceView(
        timed_steps=len(rows),
        fwd_s=col(2),
        bwd_s=col(3),
        opt_s=col(4),
        gap_s=col(5) if col(2) is not None else None,
        host_fwd_s=col(6),
        host_bwd_s=col(7),
        host_opt_s=col(8),
        host_gap_s=col(9),
        data_s=col(13),
        host_data_s=col(14),
        memory=tuple(alloc),
        peak_allocated=max(peaks) if peaks else None,
        peak_reserved=max(reserved) if reserved else None,
    )


@dataclass(frozen=True)
class Bottleneck:
    verdict: str  # "gpu-bound" | "cpu-starved" | "compute-bound" | "input-bound" | ...
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"verdict": self.verdict, "reason": self.reason}


# The host-work buckets, as the verdict names the biggest of them.
HOST_WORK_NAMES = {
    "loop": "loop code",
    "sync": "device→host syncs",
    "logging": "logging",
    "anomaly": "autograd anomaly detection",
    "idle": "sleeping or waiting",
    "stall_compute": "CPU stalls",
    "stall_blocked": "blocked stalls",
    "stall_wait": "waits for a CPU",
    "compile": "torch.compile",
}


def bottleneck(
    idle: float | None,
    util: float | None,
    data_share: float,
    host_share: float,
    host_top: tuple[str, float] | None = None,
    collectives_on_device: str | None = None,
) -> Bottleneck | None:
    """What bounds a GPU job's step. ``idle``: the device's idle share (timeline); ``util``:
    NVML's mean utilization; ``data_share``/``host_share``: the host ledger's data buckets and
    its host-work buckets (loop, syncs, logging, stalls), as shares of the steady time;
    ``host_top``: the biggest host-work bucket and its share, named in a host-bound verdict;
    ``collectives_on_device``: the backend (``nccl``) of a multi-rank job whose collectives run
    on the GPU's streams, inside the busy time the timeline and NVML see."""
    if idle is None and util is None:
        return None
    if (
        idle is not None and idle < GPU_BOUND_IDLE and (util is None or util >= GPU_BOUND_UTIL)
    ) or (idle is None and util is not None and util >= 90.0):
        busy = (
            f"busy {1 - idle:.0%} of each step on its own clock"
            if idle is not None
            else (f"{util:.0f}% utilized (NVML)")
        )
        if collectives_on_device:
            # The compute stream waits for the gradient all-reduce inside the step, and NCCL's
            # kernels count as utilization: busy is compute and communication, not told apart.
            busy += f" ({collectives_on_device} collectives included, not measured apart)"
        return Bottleneck(
            "gpu-bound",
            f"the GPU was {busy}: host work overlaps it and costs nothing",
        )
    idle_text = (
        f"the GPU sat idle {idle:.0%} of each step"
        if idle is not None
        else (f"the GPU was {util:.0f}% utilized (NVML)")
    )
    if data_share >= 0.2 and data_share >= 2 * host_share:
        return Bottleneck("input-bound", f"{idle_text}, while the loop waited for data")
    if host_share >= 0.2 and host_share >= 2 * data_share:
        busy = "ran loop code, syncs or stalls"
        if host_top is not None and host_top[0] in HOST_WORK_NAMES:
            busy = (
                f"was busy elsewhere ({HOST_WORK_NAMES[host_top[0]]} {host_top[1]:.0%} of its time)"
            )
        return Bottleneck("host-bound", f"{idle_text}, while the host {busy}")
    if data_share < 0.1 and host_share < 0.1:
        # The timeline's spans include the gaps between kernels, so its idle share is small
        # here; NVML's utilization is the number that shows the waiting.
        busy = f"the GPU was {util:.0f}% utilized (NVML)" if util is not None else idle_text
        return Bottleneck(
            "host-bound",
            f"{busy}, with no data wait or host work to blame: the host launches kernels "
            "slower than the GPU runs them",
        )
    # Neither dominates: name the measured shares rather than blame both (host work may be 0
    # where no stacks were sampled).
    return Bottleneck(
        "mixed",
        f"{idle_text}; the loop waited for data {data_share:.0%} and ran host work "
        f"{host_share:.0%} of its time",
    )
