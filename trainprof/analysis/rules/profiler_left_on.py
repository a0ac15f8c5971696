"""Profiler left on: torch.profiler records the whole training run.

``with torch.profiler.profile(...) as prof:`` around the training loop, with no ``schedule``,
records every op of every step (and with ``record_shapes``, ``profile_memory`` or
``with_stack``, more per op) and keeps the events in memory until the block ends, where it
processes them all at once. Meant for a few steps, it slows each step of a long run and its
memory grows the whole time.

The probe reads torch's own flag for a recording profiler at the first optimizer step and
watches it from then on, and notes the line that started it. What the recording costs runs in
C++ and is not measured apart; the main process's memory growth is, where it grew, with how soon
it runs the machine out (an error within the hour, as memory-growth's). memory-growth leaves
that growth to this finding: its fixes (bound a cache) would not help.

Anti-pattern::

    with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
        for step, (x, y) in enumerate(loader):      # every step of the run, recorded
            train_step(x, y)

Best practice::

    schedule = torch.profiler.schedule(wait=5, warmup=2, active=5, repeat=1)
    with torch.profiler.profile(schedule=schedule, on_trace_ready=handler) as prof:
        for step, (x, y) in enumerate(loader):
            train_step(x, y)
            prof.step()                            # 5 steps recorded, then it stops
"""

from __future__ import annotations

from trainprof.analysis.attribution import where
from trainprof.analysis.debug_modes import how_long
from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules import memory_growth
from trainprof.analysis.rules._profiler import ON, share
from trainprof.analysis.rules.registry import rule


@rule(
    id="profiler-left-on",
    examples=("profiler_left_on",),
    title="Profiler left on",
    family="host",
    harm="debug",
    needs=("steps", "debug"),
    thresholds=(ON,),
)
def check(m: Metrics) -> Finding | None:
    debug, on = m.activity.debug, share(m)
    if debug is None or on is None or on < ON.value:
        return None
    when = how_long(on)
    evidence = [
        f"a torch profiler was recording for {when}: it records every op of every step and "
        "keeps the events in memory until it stops",
        "what the recording costs a step runs in C++ and is not measured apart",
    ]
    # memory-growth leaves the main process's growth to this finding (_profiler.recording)
    grew = next((g for g in m.activity.growths if g.role == "main" and g.sustained), None)
    out_in = None
    if grew is not None:
        evidence.append(
            f"the main process's memory grew {grew.bytes_per_s * 60 / 2**20:.0f} MiB/min while "
            "it recorded"
        )
        if memory_growth.steadily_growing([grew]):
            out_in = memory_growth.running_out(m, grew.bytes_per_s)
            if out_in is not None:
                evidence.append(out_in[0])
    return Finding(
        id="profiler-left-on",
        severity="error" if out_in is not None and out_in[1] else "warning",
        title=f"A profiler records the training run ({when})",
        evidence=tuple(evidence),
        fix=(
            "record a few steps, not the run: torch.profiler.profile(schedule=torch.profiler."
            "schedule(wait=5, warmup=2, active=5, repeat=1), on_trace_ready=...) and "
            "prof.step() after each step",
            "or take the profile() block out of the training script once the trace is taken",
        ),
        where=where(debug.profiler_at),
    )
