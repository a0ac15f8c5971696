"""What DataLoader workers cost the main process: receiving each batch they make. A fix that
adds workers is advised only where what they take off the loop is worth more than that.

Workers take a batch's making (``__getitem__``, the collate) off the training loop, and add its
hand-over: the main process alone receives every batch, rebuilding its tensors one by one or
unpickling what is not a tensor. Where workers run, both are measured (the workers' batch time,
the main thread's receiving share of its loader samples); without workers the hand-over is not,
and a batch that takes the loop less than ``HANDOVER`` to make is told a larger batch first.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainprof.analysis.attribution import data_part
from trainprof.analysis.metrics import LoaderView, Metrics
from trainprof.analysis.rules._common import ms
from trainprof.analysis.rules.registry import Threshold
from trainprof.units import fmt_bytes, plural

HANDOVER = Threshold(
    "handover",
    0.001,
    "s",
    "with num_workers=0, a batch the loop makes in less than this is told a larger batch "
    "before workers: receiving a batch of 2 to 4 tensors from a worker took the main process "
    "0.7-4 ms (docs/BENCHMARKS.md), and without workers it is not measured",
)
PICKLED = Threshold(
    "pickled",
    2**20,
    "bytes",
    "with num_workers=0, a batch holding at least this many bytes of numpy arrays is told to "
    "return tensors before adding workers: from a worker, arrays are pickled through a pipe "
    "(a batch of 1 MiB took the main process 6 ms to receive, 16 MiB 51 ms, against 4 ms as "
    "tensors); below it, arrays cross faster than tensors (docs/BENCHMARKS.md)",
)
# Receiving frames of torch's tensor rebuild (file_descriptor sharing: a connection per tensor)
_TENSOR_FILES = ("torch/multiprocessing/reductions.py", "multiprocessing/resource_sharer.py")


@dataclass(frozen=True)
class HandOver:
    """Per batch: what receiving it cost the main process, and what making it cost a worker."""

    receive_s: float
    make_s: float | None  # None: the workers' batch time was not read
    pickled: bool  # most of the receiving unpickled bytes, not rebuilt tensors

    @property
    def costs_more(self) -> bool:
        """The workers cost the loop more than they take off it."""
        return self.make_s is not None and self.make_s <= self.receive_s


def measured(m: Metrics, loader: LoaderView | None, batches: float) -> HandOver | None:
    """The hand-over as the steady run measured it; None without workers or receiving."""
    led = m.ledger
    workers = (loader.config.get("num_workers") or 0) if loader else 0
    if led is None or not workers or led.get("transfer") <= 0:
        return None
    make = loader.worker_fetch_ms / 1e3 if loader and loader.worker_fetch_ms else None
    return HandOver(led.get("transfer") / max(batches, 1.0), make, unpickled(m))


def unpickled(m: Metrics) -> bool:
    """Most of the main thread's receiving (in the window) read and unpickled bytes from the
    workers' queue rather than rebuilding tensors: a batch of numpy arrays or Python objects."""
    w = m.activity.window
    tensors = other = 0.0
    for s in m.activity.spans:
        if w is not None and (s.t1 <= w[0] or s.t0 >= w[1]):
            continue
        paths = [f[1].replace("\\", "/") for f in s.frames]
        if not any("torch/utils/data/" in p for p in paths) or data_part(s.frames) != "transfer":
            continue
        if any(t in p for p in paths for t in _TENSOR_FILES):
            tensors += s.t1 - s.t0
        else:
            other += s.t1 - s.t0
    return other > tensors


def evidence(m: Metrics, h: HandOver) -> str:
    """The receiving, and why more workers cannot share it."""
    led = m.ledger
    assert led is not None
    how = (
        "the batch is no tensor, so its worker pickles it into a pipe and the main process "
        "reads and unpickles every byte (connection recv in its stacks)"
        if h.pickled
        else "it rebuilds the batch's tensors one by one (rebuild_storage_* in its stacks)"
    )
    line = (
        f"receiving each batch from the workers takes the main process {ms(h.receive_s)} "
        f"({led.share('transfer'):.0%} of the steady time): {how}, and more workers cannot "
        "share that"
    )
    if h.costs_more and h.make_s is not None:
        line += (
            f"; a worker makes a batch in {ms(h.make_s)}: the workers cost the loop more than "
            "they take off it"
        )
    return line


def fix(cfg: dict[str, object], h: HandOver | None) -> list[str]:
    """Less to receive, or nothing: no workers where they cost more than they save; tensors
    (shared memory) instead of pickled data; fewer, larger tensors, as the cost is per tensor."""
    out = []
    if h is not None and h.costs_more and h.make_s is not None:
        out.append(
            f"num_workers=0: a worker makes a batch in {ms(h.make_s)}, less than the "
            f"{ms(h.receive_s)} the main process takes to receive one (data already in memory "
            "needs no workers)"
        )
    if h is not None and h.pickled:
        out.append(
            "return tensors from the dataset and collate_fn (torch.from_numpy, torch.stack): a "
            "tensor crosses in shared memory, while a numpy array or Python object is pickled "
            "through a pipe and unpickled by the main process"
        )
        return out
    out.append(
        "fewer, larger tensors per batch: a larger batch_size, or one stacked tensor instead "
        "of a dict or tuple of many small ones"
    )
    if cfg.get("sharing_strategy") == "file_descriptor":
        out.append(
            "torch.multiprocessing.set_sharing_strategy('file_system'): a tensor crosses as a "
            "file name, not over a new connection to its worker (but a crashed process leaves "
            "its files in /dev/shm)"
        )
    return out


def main_batch_s(loader: LoaderView | None) -> float | None:
    """What making a batch costs the loop without workers (``__getitem__``, collate, pin);
    None where the loader has workers or its batches were not timed."""
    if loader is None or loader.main_fetch_ms is None:
        return None
    return (loader.main_fetch_ms + (loader.main_pin_ms or 0.0)) / 1e3


def cheap_batches(loader: LoaderView | None) -> float | None:
    """The loop's time to make a batch, where it is under ``HANDOVER`` (workers would save
    less than receiving a batch is likely to cost); else None."""
    made = main_batch_s(loader)
    return made if made is not None and made < HANDOVER.value else None


def per_batch_fix(m: Metrics, made_s: float, batches: float) -> list[str]:
    """Without workers, for batches the loop makes quickly: a larger batch first (the costs
    paid once a batch shrink per sample), and workers only as a trial the next run measures."""
    led = m.ledger
    own = led.get("data_wait", "sampler") / max(batches, 1.0) if led is not None else 0.0
    # measured but under what one decimal shows: said as such, never as 0.0 ms
    shown = ms(own) if own >= 5e-5 else "< 0.1 ms"
    machinery = f", the DataLoader's own code {shown}" if own >= 1e-5 else ""
    return [
        f"a larger batch_size: per batch, the loop makes it in {ms(made_s)}{machinery}, and the "
        "step's own fixed costs are paid per batch too: per sample they shrink as batches grow",
        f"workers would take at most {ms(made_s)} a batch off the loop, and add the main "
        "process's time receiving each batch from them (a fixed cost per tensor, not measured "
        "here: no worker ran); only if that is less do they pay: try num_workers=1 and run "
        "trainprof again, which measures both",
    ]


def pickled_batch(loader: LoaderView | None) -> tuple[str, str] | None:
    """Without workers, a batch whose numpy arrays a worker would pickle, ``PICKLED`` or more:
    (evidence, the fix to make before adding workers); None below it, or where not recorded."""
    kind = loader.main_batch if loader is not None else None
    if kind is None or kind.array_bytes < PICKLED.value:
        return None
    tensors = f"beside {plural(kind.tensors, 'tensor')}" if kind.tensors else "and no tensor"
    evidence = (
        f"a batch holds {plural(kind.arrays, 'numpy array')} of {fmt_bytes(kind.array_bytes)} "
        f"{tensors}: made in a worker, the arrays would be pickled through a pipe and unpickled "
        "by the main process, every byte (a tensor crosses in shared memory)"
    )
    fix = (
        "before adding workers, return tensors from the collate_fn (torch.from_numpy, "
        "torch.stack, or the default collate): then a batch crosses from a worker in shared "
        "memory, and the main process does not unpickle it"
    )
    return evidence, fix
