"""Which of the machine's GPUs the job uses: its GPU utilization is that of its own GPUs, not
the mean of every GPU NVML sees (a one-GPU job on an eight-GPU node would read 12 % busy while
its GPU runs at 95 %, and a neighbour's job would count as ours).

Told, in this order, by:

- ``uuid``: the CUDA device each process trains on, as the probe recorded it (torch's device
  UUID, which is NVML's without the ``GPU-`` prefix). Neither ``CUDA_VISIBLE_DEVICES`` nor
  CUDA's device order (fastest first, NVML's is PCI order) can mislead it.
- ``pid``: the GPUs whose NVML process list holds a process of the job (``attach`` has no
  probe; inside a container NVML may list the host's PIDs, which then match nothing).
- ``only``: the machine has one GPU.

Otherwise the job's GPUs are unknown, and no utilization is claimed for it.

A process's GPU is the one its parameters are on at the first optimizer step. NVML's process
lists are not added to a UUID's answer (a DataLoader worker or a stray ``torch.cuda`` call that
opens a context on GPU 0 would make an idle GPU the job's), but for a model wrapped in
``nn.DataParallel`` (one process that runs on every GPU it lists, its parameters on the first;
seen when the job calls ``train()`` on the wrapper): there the GPUs NVML lists the process on
are its replicas'.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainprof.store.events import ProcessLog
    from trainprof.store.session import Samples


def normalized_uuid(uuid: str) -> str:
    """``GPU-58d6e2a0-…`` (NVML) and ``58d6e2a0-…`` (torch) alike, lower case."""
    uuid = uuid.strip().lower()
    return uuid[4:] if uuid.startswith("gpu-") else uuid


def _precision(process: ProcessLog) -> dict[str, Any]:
    """Where the process trains, as the probe read it at its first optimizer step ({} if not)."""
    for info in process.infos:
        if isinstance(info.get("precision"), dict):
            return info["precision"]
    return {}


def _data_parallel(process: ProcessLog) -> bool:
    """The model the process trains is an ``nn.DataParallel`` (the probe's structure facts)."""
    for info in process.infos:
        facts = info.get("structure")
        if isinstance(facts, dict) and facts.get("model") == "DataParallel":
            return True
    return False


def process_uuid(process: ProcessLog) -> str | None:
    """The UUID of the CUDA device the process trains on."""
    uuid = _precision(process).get("gpu_uuid")
    return normalized_uuid(uuid) if isinstance(uuid, str) else None


def _index_by_uuid(samples: Samples) -> dict[str, int]:
    return {normalized_uuid(u): i for i, u in samples.gpu_uuid.items()}


def gpu_of(samples: Samples, process: ProcessLog) -> int | None:
    """The NVML index of the GPU one process trains on: by its UUID, else by NVML's process
    lists, else None."""
    uuid = process_uuid(process)
    index = _index_by_uuid(samples).get(uuid) if uuid is not None else None
    if index is not None:
        return index
    on = sorted(i for i, pids in samples.gpu_pids.items() if process.pid in pids)
    return on[0] if len(on) == 1 else None


def select(samples: Samples, processes: Iterable[ProcessLog]) -> None:
    """Narrow ``samples.gpu_util`` to the job's GPUs, and say which they are and how they were
    told (``samples.job_gpus``)."""
    if not samples.gpu_by_index:
        return
    trainers = [p for p in processes if p.role != "worker"]
    places = {_precision(p).get("device") for p in trainers} - {None}
    if places == {"cpu"}:
        samples.gpu_util = array("d", [math.nan] * len(samples.gpu_util))
        samples.gpu_unavailable = "the job trains on the CPU (no GPU of the machine is its)"
        return
    by_uuid = _index_by_uuid(samples)
    uuids = {u for u in (process_uuid(p) for p in trainers) if u is not None}
    chosen = sorted({by_uuid[u] for u in uuids if u in by_uuid})
    how = "uuid"
    replicas = {p.pid for p in trainers if _data_parallel(p)}
    if chosen and replicas:
        on = {i for i, seen in samples.gpu_pids.items() if seen & replicas}
        chosen = sorted(set(chosen) | on)
    if not chosen:
        pids = set(samples.procs) | {p.pid for p in trainers}
        chosen = sorted(i for i, seen in samples.gpu_pids.items() if seen & pids)
        how = "pid"
    if not chosen and len(samples.gpu_by_index) == 1:
        chosen, how = list(samples.gpu_by_index), "only"
    if not chosen:
        n = len(samples.gpu_by_index)
        samples.gpu_util = array("d", [math.nan] * len(samples.gpu_util))
        samples.gpu_unavailable = (
            f"which of the {n} GPUs the job uses is unknown (no CUDA device UUID from the probe, "
            "and NVML lists none of its processes)"
        )
        return
    samples.job_gpus = JobGpus(tuple(chosen), samples.gpu_count, how)
    if len(chosen) == len(samples.gpu_by_index):
        return  # every GPU: the mean the sampler rows gave is the job's
    by_time = [dict(zip(*samples.gpu_by_index[i], strict=True)) for i in chosen]
    util = array("d")
    for t in samples.t:
        values = [u for u in (series.get(t, math.nan) for series in by_time) if not math.isnan(u)]
        util.append(sum(values) / len(values) if values else math.nan)
    samples.gpu_util = util


def machine_utils(
    samples: Samples, window: tuple[float, float] | None
) -> tuple[tuple[int, float | None], ...]:
    """Every GPU NVML sees, the job's or not, with its mean utilization over ``window`` (the
    whole run without one; None where NVML gave none): what `gpu-unused` reads."""
    out = []
    for index, (ts, us) in sorted(samples.gpu_by_index.items()):
        pairs = [(t, u) for t, u in zip(ts, us, strict=True) if not math.isnan(u)]
        inside = [u for t, u in pairs if window is None or window[0] <= t <= window[1]]
        vals = inside or [u for _t, u in pairs]
        out.append((index, sum(vals) / len(vals) if vals else None))
    return tuple(out)


def row_util(row: dict[str, Any]) -> float | None:
    """The job's GPU utilization in one sampler row (the live status line, which has no probe
    records at hand): the GPUs NVML lists a process of the job on, else the only GPU."""
    gpus = [g for g in row.get("gpu") or [] if isinstance(g, dict)]
    pids = {str(p.get("pid")) for p in row.get("procs") or [] if isinstance(p, dict)}
    ours = [g for g in gpus if isinstance(g.get("procs"), dict) and pids & set(g["procs"])]
    if not ours and len(gpus) == 1:
        ours = gpus
    utils = [float(g["util"]) for g in ours if isinstance(g.get("util"), (int, float))]
    return sum(utils) / len(utils) if utils else None


@dataclass(frozen=True)
class JobGpus:
    """The job's GPUs among the machine's, by NVML index, and how they were told."""

    indices: tuple[int, ...]
    of: int  # GPUs NVML saw on the machine
    by: str  # "uuid", "pid" or "only"

    def describe(self) -> str:
        """``GPU 3 of 8``, ``GPUs 0, 1 of 8``, ``1 GPU``."""
        if self.of <= 1:
            return "1 GPU"
        word = "GPU" if len(self.indices) == 1 else "GPUs"
        return f"{word} {', '.join(map(str, self.indices))} of {self.of}"

    def to_json(self) -> dict[str, Any]:
        return {"indices": list(self.indices), "of": self.of, "by": self.by}
