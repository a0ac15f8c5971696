"""CPU stall: every N steps the training loop stops for CPU-bound work of its own.

Seed 000: a pure-Python ``optimal_sequence_search`` regenerated pseudo-labels every 30 steps and
the GPU sat at 0 % while it ran. The time is host CPU work in the main process (not data, not a
save, not an evaluation, not a blocking wait).

Anti-pattern::

    for step, batch in enumerate(loader):
        ...
        if step % 30 == 0:
            labels = optimal_sequence_search(scores)  # pure Python, seconds

Best practice::

    pool = concurrent.futures.ProcessPoolExecutor(1)
    if step % 30 == 0:
        pending = pool.submit(optimal_sequence_search, scores.cpu().numpy())
    if pending is not None and pending.done():
        labels = pending.result()
"""

from __future__ import annotations

from dataclasses import replace

from trainprof.analysis import work_kind
from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._stalls import (
    EXCESS,
    MIN_COUNT,
    SHARE,
    SLOW,
    Stalls,
    every,
    evidence,
    judge,
    stall_kind,
    with_kind,
)
from trainprof.analysis.rules.registry import FROM_STACKS, rule


@rule(
    id="cpu-stall",
    examples=("cpu_stall", "viterbi_stall", "genexpr_stall", "hard_negative_mining"),
    title="CPU stall",
    family="stalls",
    needs=("steps",),
    or_from=FROM_STACKS,
    claims=("stall_compute",),
    thresholds=(SLOW, EXCESS, MIN_COUNT, SHARE),
)
def check(m: Metrics) -> Finding | None:
    found = judge(m, "cpu", "stall_compute")
    if found is None:
        return None
    doing = "computing (not waiting for data, saving, evaluating or blocked)"
    cpu = m.activity.main_cpu_in_stalls
    idle = not m.activity.spans and cpu is not None and cpu < BUSY
    if idle:
        # no stacks to tell a computation from a sleep or an upload: the process's CPU says
        doing = (
            "not waiting for data, saving or evaluating; but not computing all the time "
            "either (a sleep, I/O or a lock uses no CPU): stack samples would name it"
        )
    kind = stall_kind(m, found)
    if kind is not None and kind not in (work_kind.PYTHON, work_kind.TORCH):
        doing += f": {work_kind.DESCRIBE[kind]}"
    f = finding(found, every(m, found), evidence(m, found, doing))
    if idle:
        f = replace(f, title=f"Training stalls {every(m, found)} in the main process")
    return with_kind(f, found, kind)


# Without stacks, a stall whose main process used less of a CPU than this (%) was partly a
# wait, not CPU work.
BUSY = 50.0


def finding(found: Stalls, when: str, lines: list[str]) -> Finding:
    """The finding for CPU stalls ``found``, recurring ``when`` (`every ~30 steps`), whether
    they were found in step times (`run`) or in stacks alone (`attach`)."""
    cs = found.site
    name = cs.work if cs else "the CPU-bound work"
    return Finding(
        id="cpu-stall",
        severity="warning",
        title=f"Training stalls {when} on CPU work in the main process",
        evidence=tuple(lines),
        fix=_known(
            found,
            (
                f"move {name} off the training loop: run it in a background process "
                "(concurrent.futures.ProcessPoolExecutor) and pick up the result later",
                "or precompute it before training, or vectorise it (torch/numpy instead of Python loops)",
            ),
        ),
        where=cs.where if cs else None,
        hotspot=cs.hot_where if cs else None,
    )


def _known(found: Stalls, general: tuple[str, ...]) -> tuple[str, ...]:
    """The fix of the costly call the hot line makes and the first general one, where the table
    knows the call; else the general fixes."""
    hot = found.hot
    return (hot.call.fix, general[0]) if hot is not None and hot.call is not None else general
