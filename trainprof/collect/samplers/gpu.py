"""NVML readings per GPU, from outside the job (NVML loaded into a process that later forks can
break CUDA in the children, so the probe never touches it).

No driver, no permission, MIG or a NotSupported counter all mean "unavailable", recorded as
None with the reason, never as 0 and never as a crash.
"""

from __future__ import annotations

from typing import Any


class GpuSampler:
    def __init__(self) -> None:
        self.unavailable: str | None = None
        self._nvml: Any = None
        self._handles: list[Any] = []
        self._uuids: list[str | None] = []  # read once: which GPU is the job's (store/gpus.py)
        try:
            import pynvml

            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
            self._nvml = pynvml
            self._uuids = [_uuid(pynvml, h) for h in self._handles]
            if not self._handles:
                self.unavailable = "NVML found no GPU"
        except Exception as exc:
            self.unavailable = describe_nvml_error(exc)

    def sample(self) -> list[dict[str, Any]] | None:
        if self._nvml is None or not self._handles:
            return None
        return [self._read(i, h) for i, h in enumerate(self._handles)]

    def _read(self, index: int, handle: Any) -> dict[str, Any]:
        nv = self._nvml
        row: dict[str, Any] = {"index": index, "util": None, "mem_used": None, "mem_total": None}
        if self._uuids[index] is not None:
            row["uuid"] = self._uuids[index]
        try:
            row["util"] = nv.nvmlDeviceGetUtilizationRates(handle).gpu
        except Exception as exc:
            row["util_unavailable"] = describe_nvml_error(exc)
        try:
            mem = nv.nvmlDeviceGetMemoryInfo(handle)
            row["mem_used"], row["mem_total"] = mem.used, mem.total
        except Exception:
            pass
        try:
            procs = nv.nvmlDeviceGetComputeRunningProcesses(handle)
            row["procs"] = {str(p.pid): p.usedGpuMemory for p in procs}
        except Exception:
            row["procs"] = None
        return row

    def close(self) -> None:
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception:
                pass


def _uuid(nv: Any, handle: Any) -> str | None:
    try:
        uuid = nv.nvmlDeviceGetUUID(handle)
        return uuid.decode() if isinstance(uuid, bytes) else str(uuid)
    except Exception:
        return None


def describe_nvml_error(exc: BaseException) -> str:
    name = type(exc).__name__
    if "LibraryNotFound" in name or "DriverNotLoaded" in name:
        return "no NVIDIA driver (NVML not found)"
    if "NotSupported" in name:
        return "not supported by this GPU/mode (MIG?)"
    if "NoPermission" in name:
        return "no permission to read NVML"
    if isinstance(exc, ImportError):
        return "nvidia-ml-py is not installed"
    return f"NVML error: {name}: {exc}"
