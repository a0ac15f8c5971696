"""Logging overhead: printing, logging or formatting tensors on every step.

Seeds 002/004: per-layer norms and tensor reprs printed each step of a small model took more
time than the step.

Anti-pattern::

    for step, (x, y) in enumerate(loader):
        ...
        print(f"step {step} loss {loss} grads {[p.grad.norm() for p in model.parameters()]}")

Best practice::

    if step % 100 == 0:
        print(f"step {step} loss {loss.item():.4f}")
"""

from __future__ import annotations

from dataclasses import replace

from trainprof.analysis import frameworks
from trainprof.analysis.attribution import Profile, where
from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._common import GPU_BUSY, host_time_is_free
from trainprof.analysis.rules._stalls import Stalls, every, evidence, judge
from trainprof.analysis.rules.registry import FROM_STACKS, Threshold, rule

SHARE = Threshold("share", 0.05, "share", "share of the steady run printing/logging")
LINES_PER_STEP = Threshold("lines_per_step", 0.5, "count", "lines of output per step at least")


@rule(
    id="logging-overhead",
    examples=("logging_overhead", "debug_log_stall"),
    title="Logging overhead",
    family="host",
    costs="host",
    needs=("steps", "stacks"),
    or_from=FROM_STACKS,
    claims=("logging",),
    thresholds=(SHARE, LINES_PER_STEP, GPU_BUSY),
    settings=frameworks.settings("log_every"),
    compounds={
        "host-sync": (
            "the lines that log read GPU tensors (.item(), a printed tensor), and each read "
            "waits for the GPU: logging less often removes both costs"
        ),
    },
)
def check(m: Metrics) -> Finding | None:
    if m.basis.by_stacks:
        return _from_stacks(m)
    prof = m.activity.loop_profile or m.activity.profile
    lines = m.activity.output_lines
    led = m.ledger
    if prof is None or led is None or not m.total_steps or host_time_is_free(m):
        return None
    share = led.share("logging")
    stalls = judge(m, "logging", "logging")
    if stalls is not None and share >= SHARE.value:
        return _stalls_finding(m, stalls, share)
    if lines is None:
        return None
    per_step = lines / m.total_steps
    if share < SHARE.value or per_step < LINES_PER_STEP.value:
        return None
    out_bytes = (m.activity.output_bytes or 0) / m.total_steps
    evidence = (
        f"{per_step:.1f} lines ({out_bytes:.0f} bytes) of output per step, {lines} lines in all",
        f"the main thread spent {share:.0%} of the steady run printing, logging or "
        "formatting tensors",
    )
    return finding(f"Per-step logging takes {share:.0%} of the training loop", evidence, prof)


def finding(title: str, evidence: tuple[str, ...], prof: Profile) -> Finding:
    """The finding, at the line that logs the most, whether its output was counted or only its
    stacks were seen."""
    return Finding(
        id="logging-overhead",
        severity="warning",
        title=title,
        evidence=evidence,
        fix=(
            "log every N steps (if step % 100 == 0: ...), not every step",
            "format numbers, not tensors: accumulate loss on the device and call .item() "
            "only when you log",
        ),
        where=where(prof.top_line("logging")),
    )


def _stalls_finding(m: Metrics, found: Stalls, share: float) -> Finding:
    """Stalls whose stacks format, print or log (a whole tensor in a log record every N
    steps): logging by their call context, whatever the CPU it takes; no lines-per-step floor
    applies, as a log file's lines are not the job's output."""
    lines = evidence(
        m, found, "formatting, printing or logging (its stacks are in logging or tensor formatting)"
    )
    prof = m.activity.profile or m.activity.loop_profile
    assert prof is not None
    cs = found.site
    base = finding(
        f"Logging stalls training {every(m, found)}: {share:.0%} of the steady run",
        tuple(lines),
        prof,
    )
    hot = found.hot
    quoted = hot.quoted if hot is not None and hot.text else "the record"
    general = (
        f"log a summary in {quoted} (a norm, a mean, a few values), not the whole tensor: "
        "formatting every element is what stalls",
        "or hand the records to a background thread (logging.handlers.QueueHandler and "
        "QueueListener), and drop DEBUG handlers left from debugging",
    )
    known = hot is not None and hot.call is not None
    return replace(
        base,
        fix=(hot.call.fix, general[1]) if known and hot is not None and hot.call else general,
        where=cs.where if cs is not None else base.where,
        hotspot=cs.hot_where if cs is not None else None,
    )


def _from_stacks(m: Metrics) -> Finding | None:
    """From the stacks alone: the share of the time the main thread printed, logged or
    formatted tensors (how many lines it wrote is not seen without the job's output, so no
    lines-per-step floor applies)."""
    led, prof = m.ledger, m.activity.loop_profile or m.activity.profile
    assert led is not None
    share = led.share("logging")
    if prof is None or share < SHARE.value or host_time_is_free(m):
        return None
    stalls = judge(m, "logging", "logging")
    if stalls is not None:
        return _stalls_finding(m, stalls, share)
    evidence = (
        f"the main thread spent {share:.0%} of the time printing, logging or formatting "
        f"tensors ({m.basis.sampled})",
        "how many lines a step writes is not counted: attach does not see the job's output",
    )
    return finding(f"Logging takes {share:.0%} of the training loop", evidence, prof)
