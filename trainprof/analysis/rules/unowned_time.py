"""Unowned time: a share of the steady time that the ledger shows and no finding explains.

The where-the-time-went panel shows every bucket; a rule claims a bucket's time when it finds
its cause. A bucket of at least ``share`` that no finding claimed, while the rules that judge
it were skipped (their signals were missing), is said as a warning, so that a report never
says "no problem found" beside a panel that shows one. It needs the evidence the rules need (a
steady state long enough, or ``min_samples`` stack samples). A bucket its rules judged and
found under their thresholds, or one measured over too few steps, is no finding; the report's
note then names it instead of "no problems found" (``unclaimed``).

Anti-pattern::

    for step, batch in enumerate(loader):  # 0.9 s of steps: too short for the step rules
        ...
        print(f"step {step}: loss {loss}")  # 37 % of the time, said nowhere

Best practice::

    trainprof run --steps 500 train.py  # enough steps for every rule to judge
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from trainprof.analysis import ledger as ledger_mod
from trainprof.analysis.findings import Finding, Skipped
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._common import host_time_is_free
from trainprof.analysis.rules.registry import REGISTRY, SIGNALS, Threshold, define

ID = "unowned-time"
SHARE = Threshold("share", 0.10, "share", "a bucket's share of the steady time no finding claims")
MIN_SAMPLES = Threshold("min_samples", 100, "count", "stack samples, where measured from stacks")
# The buckets a cause can own: not the training itself, idle time or what was not sampled.
OWNABLE = (
    *ledger_mod.DATA,
    *ledger_mod.STALLS,
    "anomaly",
    "sync",
    "logging",
    "loop",
)

define(
    id=ID,
    title="Unowned time",
    family="host",
    severity="warning",
    needs=(),
    claims=OWNABLE,
    thresholds=(SHARE, MIN_SAMPLES),
    check=None,
    doc=__doc__ or "",
)


def unclaimed(m: Metrics, findings: Sequence[Finding]) -> list[tuple[str, float]]:
    """Each ownable bucket of ``SHARE`` or more of the steady time that ``findings`` left
    unclaimed, largest first, as (bucket, seconds); none where host time is free."""
    led = m.ledger
    if led is None or led.window_s <= 0 or host_time_is_free(m):
        return []
    claimed: dict[str, float] = {}
    for f in findings:
        for bucket, seconds in f.claimed:
            claimed[bucket] = claimed.get(bucket, 0.0) + seconds
    left = [(b, led.get(b) - claimed.get(b, 0.0)) for b in OWNABLE]
    return sorted(
        ((b, free) for b, free in left if free / led.window_s >= SHARE.value),
        key=lambda bf: -bf[1],
    )


def unclaimed_text(m: Metrics, findings: Sequence[Finding]) -> str | None:
    """The unclaimed buckets said in words ("printing and logging takes 37 % of the steady
    time"), or None where there is none."""
    left = unclaimed(m, findings)
    if not left or m.ledger is None:
        return None
    window = m.ledger.window_s
    parts = [
        f'"{ledger_mod.label(b, m.streams_data)}" takes {free / window:.0%}' for b, free in left
    ]
    return f"{', '.join(parts)} of {m.basis.of}"


def judge(m: Metrics, findings: list[Finding], skipped: tuple[Skipped, ...]) -> Finding | None:
    """The finding for the buckets of ``SHARE`` or more that ``findings`` left unclaimed while
    every rule that judges them was skipped."""
    led = m.ledger
    if led is None:
        return None
    why = {s.id: s.reason for s in skipped}
    lines: list[str] = []
    left: list[tuple[str, float]] = []
    for bucket, free in sorted(unclaimed(m, findings), key=lambda bf: OWNABLE.index(bf[0])):
        owners = sorted(
            (r for r in REGISTRY.values() if bucket in r.claims and r.id != ID),
            key=lambda r: (r.last_resort, r.id),
        )
        if any(r.id not in why for r in owners):
            continue  # judged by a rule of its own and found under its threshold
        name = ledger_mod.label(bucket, m.streams_data)
        first = owners[0].id
        lines.append(
            f"{name}: {free / led.window_s:.0%} of {m.basis.of}; {first} was not judged: "
            f"{why[first]}"
        )
        left.append((bucket, free))
    count, enough = _evidence(m)
    if not left or not enough:
        return None
    lines.append(f"measured from {count}")
    head = ledger_mod.label(max(left, key=lambda b: b[1])[0], m.streams_data)
    total = sum(s for _b, s in left) / led.window_s
    return Finding(
        id=ID,
        severity="warning",
        title=f"{head} takes {total:.0%} of the time, and no rule could judge it",
        evidence=tuple(lines),
        fix=(
            "give the rules what they lack (the evidence says what): for a run too short, "
            "more steps (a larger --steps)",
            "the where-the-time-went panel shows the split; -v lists every skipped rule",
        ),
        claimed=tuple(left),
        impact=total,
    )


def _evidence(m: Metrics) -> tuple[str, bool]:
    """How many measurements the window's split rests on, said, and whether they are enough to
    judge (as the rules' own signals decide: a steady state long enough, stacks enough)."""
    if m.basis.by_stacks and m.outside is not None:
        samples = round(m.outside.sampled_s * m.outside.rate_hz)
        enough = SIGNALS["stacks"](m) is None and samples >= MIN_SAMPLES.value
        return f"{samples} stack samples", enough
    steps = m.steady.count if m.steady is not None else 0
    return f"{steps} timed {m.unit}s", SIGNALS["steps"](m) is None


def with_unowned(
    m: Metrics, findings: list[Finding], skipped: tuple[Skipped, ...]
) -> list[Finding]:
    """``findings`` and, where the ledger shows unowned time, the finding that says so."""
    found = judge(m, findings, skipped)
    return [*findings, replace(found, harm=REGISTRY[ID].harm)] if found else findings
