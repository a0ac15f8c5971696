"""One NVML snapshot of every GPU, read only through ``pynvml`` (nvidia-ml-py).

Every field may be unavailable (MIG makes utilization NotSupported, consumer cards lack ECC):
an unavailable field is None, never 0. No driver or library gives ``available=False`` with the
reason, never an exception. NVML is read here, in the CLI process, never inside the job.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    used_bytes: int | None


@dataclass(frozen=True)
class GpuDevice:
    index: int
    name: str
    uuid: str | None = None  # GPU-…, what CUDA_VISIBLE_DEVICES may name
    memory_total: int | None = None
    memory_used: int | None = None
    util_percent: int | None = None
    throttle_reasons: int | None = None
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    mig_current: int | None = None
    mig_pending: int | None = None
    ecc_current: int | None = None
    ecc_uncorrected: int | None = None  # volatile (since driver load) uncorrected errors
    persistence: int | None = None
    temperature_c: int | None = None
    processes: tuple[GpuProcess, ...] | None = None


@dataclass(frozen=True)
class NvmlSnapshot:
    available: bool
    reason: str | None = None  # why not available
    driver: str | None = None
    cuda_driver: int | None = None  # e.g. 12040 for CUDA 12.4, the newest the driver supports
    devices: tuple[GpuDevice, ...] = ()


def _text(value: object) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def gather_nvml() -> NvmlSnapshot:
    """Init, read every device, shut down; a missing library or driver is a reason string."""
    try:
        import pynvml
    except ImportError as exc:
        return NvmlSnapshot(False, f"nvidia-ml-py not importable: {exc}")
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound / DriverNotLoaded / OSError
        return NvmlSnapshot(False, f"{type(exc).__name__}: {exc}")
    try:

        def get(fn: Callable[..., T], *args: Any) -> T | None:
            try:
                return fn(*args)
            except Exception:  # NotSupported, NoPermission, GpuIsLost, FunctionNotFound
                return None

        count = get(pynvml.nvmlDeviceGetCount) or 0
        devices = []
        for i in range(count):
            handle = get(pynvml.nvmlDeviceGetHandleByIndex, i)
            if handle is None:
                devices.append(GpuDevice(index=i, name="unreadable"))
                continue
            devices.append(_device(pynvml, get, i, handle))
        return NvmlSnapshot(
            available=True,
            driver=_opt_text(get(pynvml.nvmlSystemGetDriverVersion)),
            cuda_driver=get(pynvml.nvmlSystemGetCudaDriverVersion),
            devices=tuple(devices),
        )
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def _opt_text(value: object) -> str | None:
    return None if value is None else _text(value)


def _opt_int(value: object) -> int | None:
    return value if isinstance(value, int) else None


def _pair(value: object) -> tuple[int | None, int | None]:
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return int(value[0]), int(value[1])
    return None, None


def _device(nv: Any, get: Callable[..., Any], index: int, h: object) -> GpuDevice:
    mem = get(nv.nvmlDeviceGetMemoryInfo, h)
    util = get(nv.nvmlDeviceGetUtilizationRates, h)
    # renamed "clocks event reasons" in newer NVML; older bindings only have the throttle name
    reasons_fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None
    )
    mig_current, mig_pending = _pair(get(nv.nvmlDeviceGetMigMode, h))
    ecc_current, _ = _pair(get(nv.nvmlDeviceGetEccMode, h))
    procs = get(nv.nvmlDeviceGetComputeRunningProcesses, h)
    return GpuDevice(
        index=index,
        name=_text(get(nv.nvmlDeviceGetName, h) or "unknown"),
        uuid=_opt_text(get(nv.nvmlDeviceGetUUID, h)),
        memory_total=None if mem is None else int(mem.total),
        memory_used=None if mem is None else int(mem.used),
        util_percent=None if util is None else int(util.gpu),
        throttle_reasons=None if reasons_fn is None else get(reasons_fn, h),
        pcie_gen=get(nv.nvmlDeviceGetCurrPcieLinkGeneration, h),
        pcie_gen_max=get(nv.nvmlDeviceGetMaxPcieLinkGeneration, h),
        pcie_width=get(nv.nvmlDeviceGetCurrPcieLinkWidth, h),
        pcie_width_max=get(nv.nvmlDeviceGetMaxPcieLinkWidth, h),
        mig_current=mig_current,
        mig_pending=mig_pending,
        ecc_current=ecc_current,
        ecc_uncorrected=get(
            nv.nvmlDeviceGetTotalEccErrors,
            h,
            nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
            nv.NVML_VOLATILE_ECC,
        )
        if ecc_current
        else None,
        persistence=get(nv.nvmlDeviceGetPersistenceMode, h),
        temperature_c=get(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
        processes=None
        if procs is None
        else tuple(
            GpuProcess(int(p.pid), _opt_int(getattr(p, "usedGpuMemory", None))) for p in procs
        ),
    )
