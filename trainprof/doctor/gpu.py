"""GPU checks over one NVML snapshot and the torch probe: can the job use the GPUs, and will
they run at full speed (clocks, PCIe link, other tenants, ECC, MIG)?

Pure functions: tests feed snapshots built by faking ``pynvml`` (see nvml.py) or by hand.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from trainprof.doctor.base import CheckResult, fmt_bytes, result
from trainprof.doctor.nvml import GpuDevice, NvmlSnapshot
from trainprof.doctor.torch_env import TorchFacts

AREA = "gpu"

# NVML clocks-event (throttle) reason bits, as in nvml.h
SW_POWER_CAP = 0x4
HW_SLOWDOWN = 0x8
SW_THERMAL = 0x20
HW_THERMAL = 0x40
HW_POWER_BRAKE = 0x80
HW_REASONS = {
    HW_SLOWDOWN: "HW slowdown",
    HW_THERMAL: "HW thermal slowdown",
    HW_POWER_BRAKE: "HW power brake",
}
BUSY_UTIL_PERCENT = 10
BUSY_MEMORY_FRAC = 0.10
NO_GPU = "no NVIDIA GPU / driver"


def _cuda_version(n: int | None) -> str | None:
    return None if n is None else f"{n // 1000}.{n % 1000 // 10}"


def _major(version: str | None) -> int | None:
    try:
        return int(version.split(".")[0]) if version else None
    except ValueError:
        return None


def describe(d: GpuDevice) -> str:
    """One line per GPU: what nvidia-smi would show, unknown fields said as such."""
    parts = [
        f"{fmt_bytes(d.memory_total)}, {fmt_bytes(d.memory_used)} used",
        "util n/a" if d.util_percent is None else f"util {d.util_percent}%",
    ]
    if d.temperature_c is not None:
        parts.append(f"{d.temperature_c} C")
    if d.persistence is not None:
        parts.append(f"persistence {'on' if d.persistence else 'off'}")
    if d.ecc_current is not None:
        parts.append(f"ECC {'on' if d.ecc_current else 'off'}")
    if d.mig_current is not None:
        parts.append(f"MIG {'on' if d.mig_current else 'off'}")
    if d.pcie_gen is not None and d.pcie_width is not None:
        parts.append(
            f"PCIe gen{d.pcie_gen} x{d.pcie_width} (max gen{d.pcie_gen_max} x{d.pcie_width_max})"
        )
    return f"GPU {d.index} {d.name}: " + ", ".join(parts)


def check_gpu_available(
    snap: NvmlSnapshot, torch: TorchFacts, env: Mapping[str, str]
) -> CheckResult:
    """Can the job use a GPU? Judged from NVML (what is there) and torch (what it can use)."""
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    cvd_line = [f"CUDA_VISIBLE_DEVICES={cvd}"] if cvd is not None else []
    torch_ok = torch.state == "ok"
    if not snap.available:
        evidence = [f"NVML: {snap.reason}", *cvd_line]
        if torch_ok and torch.cuda_available:
            return result(
                AREA,
                "warn",
                "gpu-unavailable",
                f"torch sees {torch.device_count} CUDA device(s) but NVML is unavailable",
                [*evidence, "trainprof cannot sample GPU utilization or memory"],
                ("make libnvidia-ml.so visible (e.g. run the container with --gpus all)",),
            )
        if torch_ok and torch.cuda_build:
            return result(
                AREA,
                "warn",
                "gpu-unavailable",
                f"{NO_GPU}: torch {torch.version} (CUDA build) will run on CPU",
                evidence,
                (
                    "on a GPU machine: install the NVIDIA driver / run the container with --gpus all",
                    "on a CPU machine: a CPU-only torch wheel is smaller and imports faster",
                ),
            )
        return result(AREA, "ok", "gpu-unavailable", f"{NO_GPU}: training runs on CPU", evidence)

    cuda = _cuda_version(snap.cuda_driver)
    evidence = [f"driver {snap.driver}, supports CUDA up to {cuda}", *cvd_line]
    evidence += [describe(d) for d in snap.devices]
    if not snap.devices:
        return result(
            AREA,
            "warn",
            "gpu-unavailable",
            "NVIDIA driver loaded but no GPU visible",
            evidence,
            ("check nvidia-smi; in a container pass --gpus all",),
        )
    n = len(snap.devices)
    if not torch_ok:
        return result(
            AREA, "ok", "gpu-unavailable", f"{n} NVIDIA GPU(s) (torch not checked)", evidence
        )
    if torch.hip_build or not torch.cuda_build:
        return result(
            AREA,
            "fail",
            "gpu-unavailable",
            f"torch {torch.version} is a CPU-only build: {n} GPU(s) unused",
            evidence,
            (f"install a CUDA build of torch (cu{_cuda_tag(cuda)} or older) in this environment",),
        )
    problems: list[str] = []
    build_major, driver_major = _major(torch.cuda_build), _major(cuda)
    if build_major and driver_major and build_major > driver_major:
        problems.append(f"torch needs CUDA {torch.cuda_build}, the driver supports up to {cuda}")
    if not torch.cuda_available:
        problems.append("torch.cuda.is_available() is False")
        evidence += list(torch.cuda_warnings)
        if torch.cuda_error:
            evidence.append(torch.cuda_error)
    missing_arch = sorted(
        {cap for _, cap in torch.devices if torch.arch_list and cap not in torch.arch_list}
    )
    if missing_arch:
        problems.append(f"torch has no kernels for {', '.join(missing_arch)}")
        evidence.append(f"torch.cuda.get_arch_list() {list(torch.arch_list)}")
    if problems:
        return result(
            AREA,
            "fail",
            "gpu-unavailable",
            "torch cannot use the GPUs: " + "; ".join(problems),
            evidence,
            (
                f"install a torch build for CUDA <= {cuda} that supports these GPUs, "
                "or update the NVIDIA driver",
                "check CUDA_VISIBLE_DEVICES is unset or lists valid GPU indices/UUIDs",
            ),
        )
    return result(
        AREA,
        "ok",
        "gpu-unavailable",
        f"{n} NVIDIA GPU(s), torch sees {torch.device_count}",
        evidence,
    )


def _cuda_tag(cuda: str | None) -> str:
    return cuda.replace(".", "") if cuda else "XY"


def check_throttle(snap: NvmlSnapshot) -> list[CheckResult]:
    """Hardware slowdowns cut clocks by half or more: fail; software thermal limits: warn."""
    rows = []
    for d in snap.devices:
        if d.throttle_reasons is None:
            continue
        hw = [name for bit, name in HW_REASONS.items() if d.throttle_reasons & bit]
        evidence = [describe(d), f"clocks event reasons 0x{d.throttle_reasons:x}"]
        fixes = (
            "check cooling/airflow and the power supply; nvidia-smi -q -d PERFORMANCE shows the cause",
        )
        if hw:
            rows.append(
                result(
                    AREA,
                    "fail",
                    "gpu-throttled",
                    f"GPU {d.index} throttled: {', '.join(hw)}",
                    evidence,
                    fixes,
                )
            )
        elif d.throttle_reasons & SW_THERMAL:
            rows.append(
                result(
                    AREA,
                    "warn",
                    "gpu-throttled",
                    f"GPU {d.index} throttled: SW thermal slowdown",
                    evidence,
                    fixes,
                )
            )
    if rows or not snap.devices:
        return rows
    known = [d for d in snap.devices if d.throttle_reasons is not None]
    if not known:
        return [result(AREA, "ok", "gpu-throttled", "clock throttle reasons not reported")]
    notes = [
        f"GPU {d.index}: at its power cap (normal under load)"
        for d in known
        if d.throttle_reasons and d.throttle_reasons & SW_POWER_CAP
    ]
    return [
        result(AREA, "ok", "gpu-throttled", f"no clock throttling on {len(known)} GPU(s)", notes)
    ]


def check_pcie(snap: NvmlSnapshot) -> list[CheckResult]:
    """A narrower link than the slot supports is degraded; a lower generation only counts
    under load, because idle GPUs drop the link generation to save power."""
    rows = []
    for d in snap.devices:
        if None in (d.pcie_gen, d.pcie_gen_max, d.pcie_width, d.pcie_width_max):
            continue
        assert d.pcie_gen is not None and d.pcie_gen_max is not None
        assert d.pcie_width is not None and d.pcie_width_max is not None
        busy = d.util_percent is not None and d.util_percent >= BUSY_UTIL_PERCENT
        problems = []
        if d.pcie_width < d.pcie_width_max:
            problems.append(f"x{d.pcie_width} of x{d.pcie_width_max} lanes")
        if d.pcie_gen < d.pcie_gen_max and busy:
            problems.append(f"gen{d.pcie_gen} of gen{d.pcie_gen_max} under load")
        if problems:
            rows.append(
                result(
                    AREA,
                    "warn",
                    "pcie-degraded",
                    f"GPU {d.index} PCIe link degraded: {', '.join(problems)}",
                    (describe(d), "host-to-device copies run at the link's reduced bandwidth"),
                    (
                        "reseat the GPU / riser, use a full x16 slot, check BIOS PCIe settings",
                        "nvidia-smi -q -d PCIE shows current vs max link",
                    ),
                )
            )
    if rows:
        return rows
    known = [d for d in snap.devices if d.pcie_width is not None and d.pcie_gen is not None]
    if not known:
        return []
    notes = [
        f"GPU {d.index}: gen{d.pcie_gen} of gen{d.pcie_gen_max} while idle (power saving; re-check under load)"
        for d in known
        if d.pcie_gen_max is not None and d.pcie_gen is not None and d.pcie_gen < d.pcie_gen_max
    ]
    return [
        result(
            AREA, "ok", "pcie-degraded", f"PCIe links at full width on {len(known)} GPU(s)", notes
        )
    ]


def check_busy(snap: NvmlSnapshot) -> list[CheckResult]:
    """Other tenants on a GPU take its memory and time slices from the job."""
    rows = []
    for d in snap.devices:
        procs = d.processes or ()
        reasons = []
        if procs:
            pids = ", ".join(
                str(p.pid) + ("" if p.used_bytes is None else f" ({fmt_bytes(p.used_bytes)})")
                for p in procs[:5]
            )
            reasons.append(f"{len(procs)} process(es) on it: PID {pids}")
        if d.util_percent is not None and d.util_percent >= BUSY_UTIL_PERCENT:
            reasons.append(f"util {d.util_percent}% now")
        if (
            d.memory_total
            and d.memory_used is not None
            and d.memory_used >= BUSY_MEMORY_FRAC * d.memory_total
        ):
            reasons.append(
                f"{fmt_bytes(d.memory_used)} of {fmt_bytes(d.memory_total)} memory in use"
            )
        if reasons:
            rows.append(
                result(
                    AREA,
                    "warn",
                    "gpu-busy",
                    f"GPU {d.index} is already in use",
                    [
                        *reasons,
                        f"thresholds: any process, util >= {BUSY_UTIL_PERCENT}%, memory >= {BUSY_MEMORY_FRAC:.0%}",
                        "in a container NVML reports host PIDs",
                    ],
                    ("pick an idle GPU with CUDA_VISIBLE_DEVICES=<index>, or stop the other job",),
                )
            )
    if rows or not snap.devices:
        return rows
    which = ", ".join(str(d.index) for d in snap.devices)
    return [result(AREA, "ok", "gpu-busy", f"{len(snap.devices)} GPU(s) idle (GPU {which})")]


def check_ecc(snap: NvmlSnapshot) -> list[CheckResult]:
    """Uncorrected ECC errors since driver load mean bad memory: results cannot be trusted."""
    rows = []
    for d in snap.devices:
        if d.ecc_uncorrected:
            rows.append(
                result(
                    AREA,
                    "fail",
                    "gpu-ecc-errors",
                    f"GPU {d.index}: {d.ecc_uncorrected} uncorrected ECC errors",
                    (describe(d), "volatile count since the driver loaded"),
                    (
                        "drain the GPU and report it to the admin; nvidia-smi -q -d ECC,PAGE_RETIREMENT",
                    ),
                )
            )
    if rows:
        return rows
    if any(d.ecc_current for d in snap.devices):
        return [result(AREA, "ok", "gpu-ecc-errors", "no uncorrected ECC errors")]
    return []


def check_mig(snap: NvmlSnapshot) -> list[CheckResult]:
    """MIG splits a GPU: per-GPU utilization is NotSupported and torch sees one instance."""
    rows = []
    for d in snap.devices:
        if d.mig_current is None:
            continue
        if d.mig_pending is not None and d.mig_pending != d.mig_current:
            rows.append(
                result(
                    AREA,
                    "warn",
                    "gpu-mig",
                    f"GPU {d.index}: MIG mode change pending a GPU reset",
                    (f"MIG current {d.mig_current}, pending {d.mig_pending}",),
                    ("ask the admin to finish the change (GPU reset) before training",),
                )
            )
        elif d.mig_current:
            rows.append(
                result(
                    AREA,
                    "ok",
                    "gpu-mig",
                    f"GPU {d.index}: MIG enabled",
                    (
                        "NVML utilization is NotSupported under MIG: trainprof shows GPU util as unavailable",
                        "torch uses one MIG instance: select it with CUDA_VISIBLE_DEVICES=MIG-<uuid>",
                    ),
                )
            )
    return rows


def check_gpus(snap: NvmlSnapshot, torch: TorchFacts, env: Mapping[str, str]) -> list[CheckResult]:
    """Every GPU row: availability first, then per-device health when NVML answered, of the
    GPUs the job will see (a busy GPU that CUDA_VISIBLE_DEVICES hides is no concern of its)."""
    rows = [check_gpu_available(snap, torch, env)]
    if snap.available:
        seen = replace(snap, devices=visible_devices(snap.devices, env))
        for check in (check_throttle, check_pcie, check_busy, check_ecc, check_mig):
            rows += check(seen)
    return rows


def visible_devices(
    devices: tuple[GpuDevice, ...], env: Mapping[str, str]
) -> tuple[GpuDevice, ...]:
    """The GPUs CUDA_VISIBLE_DEVICES leaves the job, as CUDA reads it: indices or (prefixes of)
    UUIDs, up to the first entry that names none. Indices are CUDA's order, NVML's (PCI bus
    order) only with CUDA_DEVICE_ORDER=PCI_BUS_ID or on a machine of one GPU model (CUDA's
    default, fastest first, then keeps PCI order): otherwise every GPU is judged. MIG entries
    name instances NVML lists under their GPU: every GPU is judged too."""
    spec = env.get("CUDA_VISIBLE_DEVICES")
    if spec is None:
        return devices
    pci_order = env.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID" or len({d.name for d in devices}) <= 1
    chosen: list[GpuDevice] = []
    for entry in (e.strip() for e in spec.split(",")):
        if entry.startswith("MIG-"):
            return devices
        if entry.lstrip("-").isdigit():
            index = int(entry)
            if not pci_order:
                return devices
            match = [d for d in devices if d.index == index]
        else:
            match = [d for d in devices if d.uuid and entry and d.uuid.startswith(entry)]
        if len(match) != 1 or match[0] in chosen:
            break  # CUDA stops at the first entry it cannot use
        chosen.append(match[0])
    return tuple(chosen)
