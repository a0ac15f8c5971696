"""The shared fix kinds every rule's fix lines are matched against, with their effect models.

Each kind declares what must hold for the job (an accelerator, dropout or batch norm in the
model, work the loss does not depend on) and what it changes (code, a setting, what is
trained). A model predicts the effect from this run's own numbers, as an upper bound, and
holds the fix back where it says the fix cannot help; a kind without one says "not predicted".
"""

from __future__ import annotations

import re

from trainprof.analysis import tuned
from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules.registry import REGISTRY, Effect, Fix

# Workers cost something of their own (each batch handed over to the loop, their share of the
# CPUs torch's threads use): a bound on the gain below this is not worth a worker. Measured on
# 2 CPUs: a heavy-augmentation job at 184 % of 2 CPUs (bound +9 %) ran 23 % slower with one.
MIN_WORKER_GAIN = 0.10
# CPUs other processes take, on average, for their load to decide what the job gets.
OTHERS_LOAD = 0.5
# The share of its usable CPUs a job's own processes use for them to be full with its own work.
OWN_FULL = 0.75


def job_cpus(m: Metrics) -> float | None:
    """CPUs the job's processes (main and workers) used on average over the steady window."""
    s = m.cpu_starvation
    if s is not None and s.job_cpus is not None:
        return s.job_cpus
    return m.cpu_percent_mean / 100.0 if m.cpu_percent_mean is not None else None


def others_cpus(m: Metrics) -> float:
    """CPUs other processes took on average (0 where not measured)."""
    s = m.cpu_starvation
    others = s.others_cpus if s is not None else None
    return others or 0.0


def finding_share(m: Metrics, f: Finding) -> float | None:
    """The share of the steady time the finding asks of the ledger (its buckets' time)."""
    led = m.ledger
    if led is None or led.window_s <= 0:
        return None
    declared = REGISTRY[f.id].claims if f.id in REGISTRY else ()
    wants = f.wants or tuple((b, 1.0) for b in declared)
    seconds = sum(led.get(b) * max(0.0, min(1.0, x)) for b, x in wants if b in declared)
    return seconds / led.window_s if seconds > 0 else None


def gain(ratio: float) -> float:
    """The samples/s gain of a step that takes ``ratio`` of its time now."""
    return 1.0 / ratio - 1.0 if ratio > 0 else float("inf")


def _workers(m: Metrics, f: Finding, line: str) -> Effect | None:
    """Workers take the data work off the loop only where CPUs are free to run it: the step
    takes at least the loop's own work (1 - wait), the same CPU work spread over the CPUs the
    job can get (used / usable, less others' load), and the data work spread over k workers.
    Under +10 % the fix is held back: a worker costs that much of its own."""
    wait, used, cpus = finding_share(m, f), job_cpus(m), m.usable_cpus
    if wait is None or used is None or not cpus:
        return None
    free = max(0.5, cpus - others_cpus(m))  # the CPUs others leave the job
    k = int(hit.group(1)) if (hit := re.search(r"num_workers=(\d+)", line)) else 0
    floor = max(1.0 - wait, used / free, wait / k if k else 0.0)
    up = gain(floor)
    basis = (
        f"the job used {used:.1f} of the {round(free, 1):g} CPUs it can get, so the same work "
        f"takes at least {min(1.0, used / free):.0%} of the time it takes now"
    )
    if up < MIN_WORKER_GAIN:
        return Effect(
            f"a worker's CPU would come from the step: {basis}; the loop's {wait:.0%} wait for "
            f"data can shrink by at most {max(0.0, up):+.0%} samples/s, less than what a worker "
            "costs (each batch handed to the loop, its share of the CPUs torch's threads use)",
            helps=False,
        )
    basis = f"the loop waits for data {wait:.0%} of the time; {basis}"
    return Effect(f"up to {up:+.0%} samples/s ({basis})")


def _threads(m: Metrics, _f: Finding, line: str) -> Effect | None:
    """Fewer threads than CPUs take away at most the loop's thread's wait for a CPU; not
    predicted under other processes' load, whose share of the CPUs the job does not decide,
    nor where the job's own threads filled its CPUs: then the loop waited while they did its
    own work, and what goes is only their contention (2 CPUs, 8 threads: waited 34 %; 2
    threads measured +17 %)."""
    s = m.cpu_starvation
    if s is None or s.runq <= 0 or others_cpus(m) >= OTHERS_LOAD:
        return None
    if s.usable and s.job_cpus is not None and s.job_cpus >= OWN_FULL * s.usable:
        n = hit.group(1) if (hit := tuned.THREADS.search(line)) else "N"
        return Effect(
            f"its own threads kept its {s.usable} CPUs busy ({s.job_cpus:.1f} used), so part of "
            f"the wait was its own work taking turns; `trainprof tune --candidate threads={n}` "
            "measures it",
            predicted=False,
        )
    return Effect(
        f"up to {gain(1.0 - s.runq):+.0%} samples/s (the loop's thread waited for a CPU "
        f"{s.runq:.0%} of the time; at most that wait goes)"
    )


def _eval_mode(_m: Metrics, _f: Finding, _line: str) -> Effect:
    """Right validation numbers (dropout off, batch norm's running statistics); speed about
    the same."""
    return Effect("right validation numbers; speed about the same")


def _checks_gone(m: Metrics, f: Finding, _line: str) -> Effect | None:
    """At most the share of the steady time inside torch.distributions' checks of its
    arguments and samples, which the line states (rules/_advice.py)."""
    return None


BATCH_SAYS = (
    "a larger batch means fewer optimizer updates per epoch: the learning rate may need to "
    "change with it"
)
PIN_SAYS = (
    "risk: a pinned job keeps to those CPUs once the other load is gone, slower than on all of them"
)

THREADS = Fix(
    "intra-op threads",
    r"set_num_threads|OMP_NUM_THREADS",
    device="any",
    modules="any",
    changes="setting",
    predict=_threads,
)
# Fewer workers than the loader has (``cpu-starved``: they take the loop's CPU).
FEWER_WORKERS = Fix(
    "fewer workers",
    r"fewer (?:DataLoader )?workers|num_workers=0\b|not more workers",
    device="any",
    modules="any",
    changes="setting",
)

# Ordered: a line is the first kind it matches.
SHARED: tuple[Fix, ...] = (
    FEWER_WORKERS,
    Fix(
        "more workers",
        r"num_workers=(?:[1-9]|\.\.\.)|more workers|num_workers is|dataloader_num_workers|"
        r"-j/--workers|num_workers up to",
        device="any",
        modules="any",
        changes="setting",
        unless=r"validation|val_dataloader|evaluation",
        predict=_workers,
    ),
    Fix(
        "persistent workers",
        r"persistent_workers",
        device="any",
        modules="any",
        changes="setting",
        needs_workers=True,
    ),
    THREADS,
    Fix(
        "pin to CPUs",
        r"taskset|cpusets?\b",
        device="any",
        modules="any",
        changes="setting",
        says=PIN_SAYS,
    ),
    Fix(
        "pinned memory",
        r"pin_memory=True|pin_memory is|--pin-mem|non_blocking=True",
        device="accelerator",
        modules="any",
        changes="setting",
    ),
    Fix(
        "augmentation on the GPU",
        r",? move augmentation to the GPU",
        device="accelerator",
        modules="any",
        changes="code",
        clause=True,
    ),
    Fix(
        "eval mode",
        r"model\.eval\(\)",
        device="any",
        modules="dropout or batch norm",
        changes="code",
        predict=_eval_mode,
    ),
    Fix(
        "larger batch",
        r"larger (?:DataLoader |training |per_device_train_)?batch|batch_size=\d+ \(\d+×\)|"
        r"batch_size=\.\.\.|-b/--batch-size|per_device_train_batch_size|"
        r"batch_size \(the micro-batch\)",
        device="any",
        modules="any",
        changes="training",
        says=BATCH_SAYS,
        unless=r"eval|validation|inference",
    ),
    Fix(
        "every N steps",
        r"every N steps|every \d+ steps",
        device="any",
        modules="any",
        changes="training",
        loss_free=True,
    ),
    Fix(
        "another thread",
        r"another thread|background thread|off the training loop's thread",
        device="any",
        modules="any",
        changes="code",
        loss_free=True,
    ),
    Fix(
        "argument validation off",
        r"validate_args=False",
        device="any",
        modules="any",
        changes="code",
        predict=_checks_gone,
    ),
    Fix("a change to the code", r".", device="any", modules="any", changes="code"),
)
