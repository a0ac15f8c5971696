"""Swap: a training job whose pages are swapped out stalls for seconds at a time (the
"stutter" users report as 6 it/s dropping to 1 it/s and back)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from trainprof.doctor.base import CheckResult, MiB, fmt_bytes, result

AREA = "memory"
ACTIVE_BYTES_PER_S = 1 * MiB  # sustained paging above this is the machine short of RAM now
USED_WARN_FRAC = 0.5
SAMPLE_S = 0.5


@dataclass(frozen=True)
class SwapInputs:
    total_bytes: int
    used_bytes: int
    swap_in_bytes_per_s: float | None  # None when activity could not be sampled
    swap_out_bytes_per_s: float | None
    swappiness: int | None
    sample_s: float


def check_swap(inp: SwapInputs) -> CheckResult:
    """Warn while the machine is paging now, or when half the swap is already in use."""
    if inp.total_bytes <= 0:
        return result(AREA, "ok", "swap-active", "no swap configured", ("swap total 0",))
    rate = None
    if inp.swap_in_bytes_per_s is not None and inp.swap_out_bytes_per_s is not None:
        rate = inp.swap_in_bytes_per_s + inp.swap_out_bytes_per_s
    evidence = [
        f"swap {fmt_bytes(inp.used_bytes)} used of {fmt_bytes(inp.total_bytes)}",
        "paging now: unknown"
        if rate is None
        else f"paging now: in {fmt_bytes(inp.swap_in_bytes_per_s)}/s, "
        f"out {fmt_bytes(inp.swap_out_bytes_per_s)}/s over {inp.sample_s:.1f} s "
        f"(warn above {fmt_bytes(ACTIVE_BYTES_PER_S)}/s)",
    ]
    if inp.swappiness is not None:
        evidence.append(
            f"vm.swappiness {inp.swappiness}"
            + (" (10 keeps training memory in RAM longer)" if inp.swappiness > 10 else "")
        )
    fixes = (
        "stop other memory-heavy jobs, or lower DataLoader(num_workers=...) and any in-RAM caches",
        "sudo sysctl vm.swappiness=10  (host-wide; doctor never changes it)",
    )
    if rate is not None and rate > ACTIVE_BYTES_PER_S:
        return result(
            AREA,
            "warn",
            "swap-active",
            f"machine is swapping now ({fmt_bytes(rate)}/s)",
            evidence,
            fixes,
        )
    used_frac = inp.used_bytes / inp.total_bytes
    if used_frac >= USED_WARN_FRAC:
        return result(
            AREA,
            "warn",
            "swap-active",
            f"swap {used_frac:.0%} used: RAM is already short",
            [*evidence, f"warn at {USED_WARN_FRAC:.0%} used"],
            fixes,
        )
    return result(
        AREA,
        "ok",
        "swap-active",
        f"swap {fmt_bytes(inp.used_bytes)} used of {fmt_bytes(inp.total_bytes)}, not paging",
        evidence,
    )


def read_swappiness(path: Path = Path("/proc/sys/vm/swappiness")) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def gather_swap(sample_s: float = SAMPLE_S) -> SwapInputs:
    """Two reads of the kernel's cumulative swap-in/out counters, ``sample_s`` apart."""
    first = psutil.swap_memory()
    rate_in: float | None = None
    rate_out: float | None = None
    if first.total > 0:
        t0 = time.monotonic()
        time.sleep(sample_s)
        second = psutil.swap_memory()
        dt = max(time.monotonic() - t0, 1e-3)
        rate_in = max(second.sin - first.sin, 0) / dt
        rate_out = max(second.sout - first.sout, 0) / dt
    return SwapInputs(
        total_bytes=int(first.total),
        used_bytes=int(first.used),
        swap_in_bytes_per_s=rate_in,
        swap_out_bytes_per_s=rate_out,
        swappiness=read_swappiness(),
        sample_s=sample_s if first.total > 0 else 0.0,
    )
