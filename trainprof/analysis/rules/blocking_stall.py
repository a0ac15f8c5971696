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

from collections import Counter

from trainprof.analysis import work_kind
from trainprof.analysis.attribution import where
from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._common import host_time_is_free
from trainprof.analysis.rules._per_step import hot_work, periodic
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
from trainprof.analysis.rules.registry import FROM_STACKS, Threshold, rule

EVERY_STEP = Threshold(
    "every_step_share",
    0.10,
    "share",
    "or a wait in every step (a child process, a socket, a lock, a file, a sleep) at one line, "
    "this share of the loop outside stalls",
)
MIN_SAMPLES = Threshold(
    "min_samples", 10, "count", "and at least this many stack samples of that wait"
)


@rule(
    id="blocking-stall",
    examples=("blocking_upload", "subprocess_per_step"),
    title="Blocking stall",
    family="stalls",
    needs=("steps", "stacks"),
    or_from=FROM_STACKS,
    claims=("stall_blocked", "idle", "loop"),
    thresholds=(SLOW, EXCESS, MIN_COUNT, SHARE, EVERY_STEP, MIN_SAMPLES),
)
def check(m: Metrics) -> Finding | None:
    found = judge(m, "blocked", "stall_blocked")
    if found is None:
        return _every_step(m)
    doing = "blocked waiting (its stack samples were idle: sleep, socket, lock or I/O)"
    kind = stall_kind(m, found)
    if kind in work_kind.WAITS:
        doing = f"blocked, {work_kind.DESCRIBE[kind]}"
    return with_kind(finding(found, every(m, found), evidence(m, found, doing)), found, kind)


def _every_step(m: Metrics) -> Finding | None:
    """A wait in every step, at the loop's hottest line outside stalls: as much a blocking
    wait as one every N steps, here N is 1."""
    w = hot_work(m)
    if w is None or not w.waits or w.frame is None or host_time_is_free(m):
        return None
    rate = m.stack_rate_hz
    if w.at_line < EVERY_STEP.value or (rate and w.sampled_s * rate < MIN_SAMPLES.value):
        return None
    if m.basis.by_stacks and periodic(m, w.frame):
        return None
    assert w.kind is not None
    hot, share = w.hot, w.share
    what = work_kind.DESCRIBE[w.kind]
    evidence = [
        f"every step the main thread is {what}: {share:.0%} of the loop's own time "
        f"({w.led.get('idle'):.2f} s off the CPU, {m.basis.of})"
        if m.basis.by_stacks
        else f"every step the main thread is {what}: {share:.0%} of the loop's own time "
        f"({w.led.get('idle'):.2f} s of the steady run off the CPU)",
    ]
    if hot is not None:
        evidence.append(hot.evidence)
    first = hot.call.fix if hot is not None and hot.call is not None else work_kind.FIX[w.kind]
    name = f"`{hot.text}`" if hot is not None and hot.text else "the call"
    # the loop time at the line (a fork before the wait), the rest of the loop bucket not
    other = w.prof.seconds.get("other", 0.0)
    at_loop = w.prof.lines.get("other", Counter())[w.frame] / 1e6
    return Finding(
        id="blocking-stall",
        severity="warning",
        title=f"The training loop waits every step, {what}: {share:.0%} of the loop",
        evidence=tuple(evidence),
        fix=(
            first,
            f"or do {name} every N steps, or in a background thread "
            "(concurrent.futures.ThreadPoolExecutor) so the loop does not wait for it",
        ),
        where=where(w.frame),
        wants=(("idle", 1.0), ("loop", at_loop / other if other > 0 else 0.0)),
    )


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
