"""For the job scripts some tests run under the probe: the device timeline on stand-in CUDA
events, which this machine cannot have. A job imports it with this folder on its path
(``conftest.JOB_HELPERS_ENV``)."""

from __future__ import annotations

from typing import Any


class FreeEvent:
    """A CUDA event that is always done and always 1 ms after the one before."""

    def record(self, stream: Any = None) -> None:
        pass

    def query(self) -> bool:
        return True

    def elapsed_time(self, other: Any) -> float:
        return 1.0


def use_stand_in_timeline(memory: Any = None, every_stride_step: bool = False) -> None:
    """What a CUDA job's first step starts, ``device_marks.start_timeline``, builds its timeline
    on ``FreeEvent`` (and ``memory``, the allocator read, if given) from now on. With
    ``every_stride_step``: no cap on timed steps a second, however fast the loop goes."""
    from trainprof.probe import device, device_marks, records

    w = records.writer()
    device_marks.cuda_timeline = lambda *a: device.Timeline(FreeEvent, memory, w.add, w.us)
    if every_stride_step:
        device.MAX_PER_S = 1e9
