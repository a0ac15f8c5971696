"""Blocking stall: every N steps the training loop blocks, waiting (I/O, sleep, a lock, the
network), while the CPU and the GPU sit idle.

A synchronous metrics upload, a remote file read or a lock shared with another thread stops
training for as long as the other side takes. Computing nothing, it is not fixed by faster code.

Anti-pattern::

    if step % 10 == 0:
        requests.post(METRICS_URL, json=metrics)  # waits for the server each time

Best practice::

    uploader = concurrent.futures.ThreadPoolExecutor(1)
    if step % 100 == 0:
        uploader.submit(requests.post, METRICS_URL, json=metrics)
"""

from __future__ import annotations

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
    id="blocking-stall",
    examples=("blocking_upload",),
    title="Blocking stall",
    family="stalls",
    needs=("steps", "stacks"),
    or_from=FROM_STACKS,
    claims=("stall_blocked",),
    thresholds=(SLOW, EXCESS, MIN_COUNT, SHARE),
)
def check(m: Metrics) -> Finding | None:
    found = judge(m, "blocked", "stall_blocked")
    if found is None:
        return None
    doing = "blocked waiting (its stack samples were idle: sleep, socket, lock or I/O)"
    kind = stall_kind(m, found)
    if kind in work_kind.WAITS:
        doing = f"blocked, {work_kind.DESCRIBE[kind]}"
    return with_kind(finding(found, every(m, found), evidence(m, found, doing)), found, kind)


def finding(found: Stalls, when: str, lines: list[str]) -> Finding:
    """The finding for blocking stalls ``found``, recurring ``when``."""
    cs = found.site
    name = cs.work if cs else "the blocking call"
    return Finding(
        id="blocking-stall",
        severity="warning",
        title=f"Training stalls {when}, blocked waiting in the main process",
        evidence=tuple(lines),
        fix=_known(
            found,
            (
                f"do {name} in a background thread (concurrent.futures.ThreadPoolExecutor) so the "
                "loop does not wait for it",
                "or do it less often, or with a timeout",
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
