"""cgroup memory limit vs RAM: in a container `free` and psutil show the host's RAM, but the
kernel OOM-kills the job (often a DataLoader worker: "killed by signal: Killed") at the limit."""

from __future__ import annotations

from dataclasses import dataclass

import psutil

from trainprof.doctor.base import CheckResult, GiB, fmt_bytes, result
from trainprof.doctor.cgroup import CgroupLimits

AREA = "memory"
HEADROOM_BYTES = 4 * GiB  # a training process plus a few workers needs several GiB
FAIL_FRAC = 0.95


@dataclass(frozen=True)
class MemoryInputs:
    ram_bytes: int
    available_bytes: int
    limit_bytes: int | None
    usage_bytes: int | None
    source: str | None


def check_memory(inp: MemoryInputs) -> CheckResult:
    """Fail when the cgroup is already nearly full; warn when the headroom under it is small."""
    ram = f"RAM {fmt_bytes(inp.ram_bytes)}, {fmt_bytes(inp.available_bytes)} available"
    if inp.limit_bytes is None or inp.limit_bytes >= inp.ram_bytes:
        return result(AREA, "ok", "memory-limit", "no cgroup memory limit below RAM", (ram,))
    usage = inp.usage_bytes or 0
    left = inp.limit_bytes - usage
    evidence = (
        ram,
        f"cgroup limit {fmt_bytes(inp.limit_bytes)} ({inp.source}), "
        f"{fmt_bytes(usage)} in use, {fmt_bytes(left)} left",
        "the kernel OOM-kills at the cgroup limit, not at RAM; psutil/free report RAM",
        f"warn under {fmt_bytes(HEADROOM_BYTES)} left, fail at {FAIL_FRAC:.0%} used",
    )
    fixes = (
        "raise the limit: docker run --memory=..., or the pod's resources.limits.memory",
        "or fewer DataLoader workers / smaller in-RAM caches: each worker's RSS counts against it",
    )
    title = f"memory limit {fmt_bytes(inp.limit_bytes)} (cgroup) < RAM {fmt_bytes(inp.ram_bytes)}"
    if usage >= FAIL_FRAC * inp.limit_bytes:
        return result(
            AREA,
            "fail",
            "memory-limit",
            f"{title}, {usage / inp.limit_bytes:.0%} used",
            evidence,
            fixes,
        )
    if left < HEADROOM_BYTES:
        return result(
            AREA, "warn", "memory-limit", f"{title}, only {fmt_bytes(left)} left", evidence, fixes
        )
    return result(AREA, "ok", "memory-limit", title, evidence)


def gather_memory(limits: CgroupLimits) -> MemoryInputs:
    vm = psutil.virtual_memory()
    return MemoryInputs(
        ram_bytes=int(vm.total),
        available_bytes=int(vm.available),
        limit_bytes=limits.memory_limit,
        usage_bytes=limits.memory_usage,
        source=limits.memory_source,
    )
