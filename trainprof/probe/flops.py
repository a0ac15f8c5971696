"""The model's FLOPs per optimizer step, counted once per run, for MFU.

torch's own ``torch.utils.flop_counter.FlopCounterMode`` is entered at the end of the first
optimizer step and left at the end of the second, so it sees one whole step: every forward
(all micro-batches of a gradient-accumulation step), the backward (autograd's device threads
inherit the dispatch mode) and the optimizer. Counting runs each op through Python, so that
step is slow: the analysis treats it as warm-up and leaves it out of every statistic.

Only CUDA jobs are counted (MFU needs a device peak; a CPU job must not change at all), and
not a job that uses ``torch.compile`` (an active dispatch mode would make Dynamo recompile)
or captures CUDA graphs. Counting fails open: a formula that raises loses its op's FLOPs (the
count says how many), never the user's op.
"""

from __future__ import annotations

import sys
from typing import Any

from trainprof.probe import records


def _safe_counter(torch: Any) -> Any:
    """A FlopCounterMode whose per-op counting cannot raise into the job."""
    from torch.utils.flop_counter import FlopCounterMode

    class SafeCounter(FlopCounterMode):  # type: ignore[misc]
        failed = 0

        def _count_flops(self, func_packet: Any, out: Any, args: Any, kwargs: Any) -> Any:
            try:
                return super()._count_flops(func_packet, out, args, kwargs)
            except Exception:
                self.failed += 1
                return out

    return SafeCounter(display=False)


def _why_not(torch: Any) -> str | None:
    """A reason to leave this job uncounted, or None."""
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is not None:
        try:
            if dynamo.utils.counters["stats"]["unique_graphs"]:
                return "the job uses torch.compile (counting would make it recompile)"
        except Exception:
            return "torch.compile state unknown"
    if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
        return "a CUDA graph is being captured"
    return None


class StepFlops:
    """Counts the FLOPs of one optimizer step: ``begin`` at a step's end, ``end`` at the next."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.counter: Any = None
        self.first_step = 0  # the step being counted (1-based), once begun
        self.done = False

    def begin(self, steps_so_far: int) -> None:
        if self.done:
            return
        self.done = True  # one try per run, whatever happens
        reason = _why_not(self.torch)
        if reason is not None:
            records.record_info({"flops": {"skipped": reason}})
            return
        counter = _safe_counter(self.torch)
        counter.__enter__()
        self.counter = counter
        self.first_step = steps_so_far + 1

    def end(self, steps_so_far: int) -> None:
        """At a step's end: leave the mode, if it is the innermost one, and record the count.
        A mode the job entered after ours stays on top of it: counting then goes on until it
        is gone, and the steps it spanned share the total."""
        counter = self.counter
        if counter is None:
            return
        from torch.utils._python_dispatch import _get_current_dispatch_mode

        if _get_current_dispatch_mode() is not counter.mode:
            return
        self.counter = None
        counter.__exit__(None, None, None)
        steps = steps_so_far - self.first_step + 1
        records.record_info(
            {
                "flops": {
                    "step": self.first_step,
                    "steps": steps,
                    "per_step": counter.get_total_flops() // max(1, steps),
                    "failed_ops": counter.failed,
                }
            }
        )
