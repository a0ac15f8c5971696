"""Fake NVIDIA devices, installed by monkeypatching functions of the real ``pynvml`` module.

Only the library boundary is faked: trainprof's gatherer calls ``pynvml`` exactly as on a GPU
machine. A device field set to ``UNSUPPORTED`` raises NVMLError_NotSupported, the way MIG makes
utilization unsupported or a consumer card lacks ECC.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

UNSUPPORTED = object()
GiB = 1024**3


@dataclass
class FakeGpu:
    name: str = "NVIDIA H100 80GB HBM3"
    memory_total: int = 80 * GiB
    memory_used: int = 512 * 1024**2
    util: Any = 0
    throttle: Any = 0x1  # GPU idle
    pcie: Any = (5, 5, 16, 16)  # current gen, max gen, current width, max width
    mig: Any = (0, 0)
    ecc: Any = (1, 1)
    ecc_uncorrected: Any = 0
    persistence: Any = 1
    temperature: Any = 34
    processes: Any = field(default_factory=list)  # [(pid, used_bytes)]
    uuid: Any = None  # None: GPU-<index>-… from its handle


def _value(v: Any) -> Any:
    if v is UNSUPPORTED:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
    return v


def install(
    monkeypatch: pytest.MonkeyPatch,
    gpus: list[FakeGpu],
    driver: str = "550.54.15",
    cuda_driver: int = 12040,
    init_error: int | None = None,
) -> list[str]:
    """Patch pynvml's functions; returns the calls made, so tests can see shutdown happened."""
    calls: list[str] = []

    def init() -> None:
        calls.append("init")
        if init_error is not None:
            raise pynvml.NVMLError(init_error)

    def gpu(h: Any) -> FakeGpu:
        return gpus[h]

    def pcie(i: int) -> Any:
        return lambda h: _value(gpu(h).pcie)[i]

    fns: dict[str, Any] = {
        "nvmlInit": init,
        "nvmlShutdown": lambda: calls.append("shutdown"),
        "nvmlSystemGetDriverVersion": lambda: driver,
        "nvmlSystemGetCudaDriverVersion": lambda: cuda_driver,
        "nvmlDeviceGetCount": lambda: len(gpus),
        "nvmlDeviceGetHandleByIndex": lambda i: i,
        "nvmlDeviceGetName": lambda h: _value(gpu(h).name),
        "nvmlDeviceGetMemoryInfo": lambda h: SimpleNamespace(
            total=gpu(h).memory_total,
            used=gpu(h).memory_used,
            free=gpu(h).memory_total - gpu(h).memory_used,
        ),
        "nvmlDeviceGetUtilizationRates": lambda h: SimpleNamespace(
            gpu=_value(gpu(h).util), memory=0
        ),
        "nvmlDeviceGetCurrentClocksEventReasons": lambda h: _value(gpu(h).throttle),
        "nvmlDeviceGetCurrentClocksThrottleReasons": lambda h: _value(gpu(h).throttle),
        "nvmlDeviceGetCurrPcieLinkGeneration": pcie(0),
        "nvmlDeviceGetMaxPcieLinkGeneration": pcie(1),
        "nvmlDeviceGetCurrPcieLinkWidth": pcie(2),
        "nvmlDeviceGetMaxPcieLinkWidth": pcie(3),
        "nvmlDeviceGetMigMode": lambda h: _value(gpu(h).mig),
        "nvmlDeviceGetEccMode": lambda h: _value(gpu(h).ecc),
        "nvmlDeviceGetTotalEccErrors": lambda h, kind, counter: _value(gpu(h).ecc_uncorrected),
        "nvmlDeviceGetPersistenceMode": lambda h: _value(gpu(h).persistence),
        "nvmlDeviceGetTemperature": lambda h, sensor: _value(gpu(h).temperature),
        "nvmlDeviceGetUUID": lambda h: (
            _value(gpu(h).uuid) or f"GPU-{h:08x}-0000-0000-0000-000000000000"
        ),
        "nvmlDeviceGetComputeRunningProcesses": lambda h: [
            SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in _value(gpu(h).processes)
        ],
    }
    for name, fn in fns.items():
        monkeypatch.setattr(pynvml, name, fn, raising=False)
    return calls
