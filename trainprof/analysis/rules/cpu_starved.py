"""CPU-starved: the training loop's thread is ready to run but waits for a CPU.

Four things take the CPUs from it, each with its own fix. A cgroup CPU quota (``docker
--cpus``, a Kubernetes CPU limit) that the job overruns: torch, OpenMP and most
``num_workers = os.cpu_count()`` code count the host's cores, not the quota, so a container
allowed 4 CPUs on a 64-core host starts 64 intra-op threads, and the quota stops every thread
of the job for the rest of each 100 ms period once they have spent it. The job's own threads
beyond the CPUs it may use: more intra-op threads than CPUs, or DataLoader workers on top of
intra-op threads that fill them (the main thread is one of torch's intra-op threads). Or other
processes that keep the machine's CPUs busy; trainprof's own processes (its sampler, py-spy) are
measured and said apart from them, and named when they are the competition. The kernel counts
the time each thread waited, runnable, for a CPU (schedstat); the host sampler reads it for the
main thread, with the quota's counters.

The wait is measured, and is the ledger's own bucket (``cpu_wait``): the kernel's run-queue
delay of the loop's thread over the steady window, taken out of the buckets it ran in (a stack
sample cannot tell a running thread from one waiting to run), and the stalls of the loop's own
code while it waited (``stall_wait``, stalls.waits_for_a_cpu). The finding claims both: under
another process's load, it is the share the report leads with. What a fix gains is not that
share: the job's other threads may work while the loop's thread waits. Measured on 2 CPUs: 8
intra-op threads under a 1-CPU quota, the loop's thread waited 31 % and 1 thread ran 30 %
faster; 2 threads under it, it waited 50 % and 1 thread ran 10 % faster.

Anti-pattern::

    # in a container limited to 4 CPUs, on a 64-core host
    loader = DataLoader(dataset, num_workers=os.cpu_count())   # 64 workers
    # torch.get_num_threads() is 64 as well

Best practice::

    cpus = 4                                                   # the quota, not os.cpu_count()
    loader = DataLoader(dataset, num_workers=2)
    torch.set_num_threads(cpus - 2)                            # busy workers take CPUs too
"""

from __future__ import annotations

import math
from dataclasses import replace

from trainprof.analysis import frameworks
from trainprof.analysis.cpu_starvation import CpuStarvation
from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._common import GPU_BUSY, host_time_is_free, ms, primary_loader
from trainprof.analysis.rules._fixes import FEWER_WORKERS, THREADS
from trainprof.analysis.rules.registry import Threshold, rule
from trainprof.analysis.stalls import Stall
from trainprof.units import plural

RUNQ = Threshold(
    "runq", 0.10, "share", "the main thread waited, runnable, for a CPU this share of the time"
)
THROTTLED = Threshold(
    "throttled", 0.10, "share", "the cgroup quota stopped the job in this share of its periods"
)
BUSY = 0.75  # a job using this share of the CPUs it may use keeps them busy itself
MACHINE_FULL = 0.9  # a machine this busy has no CPU to spare
OTHERS_MIN = 0.5  # CPUs other processes must use to count as the competition
# The loop's thread's wait for a CPU: the run queue's, and the stalls it stood still in
WAITS = ("cpu_wait", "stall_wait")


# The framework's words for num_workers, for the fix that sets it (the rule's other fixes
# do not touch the DataLoader).
WORKERS_SETTING = frameworks.settings("workers")


@rule(
    id="cpu-starved",
    examples=("oversubscribed", "workers_oversubscribed", "beside_busy_loop", "pinned_threads"),
    title="CPU-starved",
    family="host",
    needs=("steps", "samples", "schedstat"),
    or_from=("samples", "schedstat", "sampled_window"),
    claims=WAITS,
    # its num_workers lines take workers away: never the shared "more workers"
    fixes=(THREADS, replace(FEWER_WORKERS, match=r"num_workers|--workers")),
    thresholds=(RUNQ, THROTTLED, GPU_BUSY),
    compounds={
        "input-bound": (
            "the DataLoader's workers and the loop draw on the same CPUs: what takes the loop's "
            "CPU slows its workers too, and its own share of each batch (receiving it, the "
            "collate); more workers only add to the competition. Where the workers compute, a "
            "batch made with less CPU shortens both waits, so make it cheaper first; where "
            "batches are cheap, size workers and torch's threads to the CPUs"
        ),
        "loop-overhead": (
            "the loop's own host work waits for a CPU too, and part of its measured time is "
            "that wait: cpu-starved's fix first, then the host work that is left"
        ),
    },
)
def check(m: Metrics) -> Finding | None:
    s = m.cpu_starvation
    if s is None or s.runq < RUNQ.value or host_time_is_free(m):
        return None
    threads = _intra_op_threads(m)
    workers = m.worker_load.workers if m.worker_load is not None else 0
    loader_workers = _loader_workers(m)
    if s.throttled is not None and s.throttled >= THROTTLED.value and s.quota is not None:
        cause, fix = _quota(s, threads, workers)
    elif _trainprof_itself(s):
        cause, fix = _trainprof(s)
    elif _workers_beyond(s, threads, loader_workers, m):
        return _workers(m, s, threads or 1, loader_workers)
    elif _own_threads(s, threads, workers):
        cause, fix = _own(s, threads, workers)
    elif _others(s):
        cause, fix = _other_processes(s, threads)
    else:
        return None  # waiting, but nothing measured says for what: no advice to give
    waits = [st for st in m.activity.stalls if st.cause == "wait"]
    return Finding(
        id="cpu-starved",
        severity="warning",
        title=_title(s),
        evidence=(_waited(s), cause, *_stalled(m, waits)),
        fix=tuple(fix),
        wants=tuple((b, 1.0) for b in WAITS),
    )


def _title(s: CpuStarvation) -> str:
    return f"CPU-starved: the training loop waits for a CPU {s.runq:.0%} of the time"


def _waited(s: CpuStarvation) -> str:
    return (
        f"the training loop's thread was ready to run but waited for a CPU {s.runq:.0%} of "
        "the steady time (the kernel's run-queue delay of the main thread)"
    )


def _loader_workers(m: Metrics) -> int:
    """The training DataLoader's num_workers (0: none, or no loader recorded)."""
    loader = primary_loader(m)
    n = loader.config.get("num_workers") if loader is not None else None
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 0


def _workers_beyond(s: CpuStarvation, threads: int | None, workers: int, m: Metrics) -> bool:
    """DataLoader workers on top of intra-op threads that fit the CPUs (the loop's thread one of
    them) make more threads than CPUs, the job keeps its CPUs busy itself (or nothing else uses a
    CPU to speak of), and the loop waits for a CPU longer than for data: the workers keep ahead
    of it, and only take its CPU."""
    if not workers or not s.usable or s.job_cpus is None or m.ledger is None:
        return False
    own = threads or 1
    if own > s.usable or own + workers <= s.usable:
        return False
    busy = s.job_cpus >= BUSY * s.usable or _others_cpus(s) < OTHERS_MIN
    return busy and m.ledger.share("data_wait") < s.runq


def _workers(m: Metrics, s: CpuStarvation, threads: int, workers: int) -> Finding:
    """The workers take the loop's CPU: the loop's wait is what they cost it, and is claimed."""
    usable = s.usable or 1
    led = m.ledger
    data_wait = led.share("data_wait") if led is not None else 0.0
    intra = (
        f"torch's {threads} intra-op threads (the training loop's thread one of them)"
        if threads > 1
        else "the training loop's thread"
    )
    cause = (
        f"{intra} and {plural(workers, 'DataLoader worker')}: {threads + workers} threads for the "
        f"{plural(usable, 'CPU')} the job may use; its processes used {s.job_cpus or 0.0:.1f} "
        "CPUs on average"
    )
    ahead = (
        f"the loop waited for its workers' next batch {data_wait:.1%} of the steady time "
        "(receiving one aside): the workers keep ahead of it, and its wait for a CPU is what "
        "they cost it"
    )
    keep = min(workers, max(1, usable // 2)) if usable > 1 else 0
    fix = []
    threads_fix = f"torch.set_num_threads({usable - keep}) (or OMP_NUM_THREADS={usable - keep})"
    fits = f"workers and intra-op threads together no more than the {usable} CPUs"
    if keep and keep < workers:
        fix.append(
            f"fewer DataLoader workers, and torch's threads for the CPUs they leave: "
            f"num_workers={keep} and {threads_fix}: {fits}, num_workers at most CPUs - 1"
        )
    elif keep:
        fix.append(f"torch's threads for the CPUs the workers leave: {threads_fix}: {fits}")
    fix.append(
        "or num_workers=0: the loop makes its batches itself, which costs it less than "
        "this wait where a batch is cheap to make"
    )
    fix.extend(frameworks.setting_fix(m.activity.framework, WORKERS_SETTING))
    return Finding(
        id="cpu-starved",
        severity="warning",
        title=_title(s),
        evidence=(_waited(s), cause, ahead),
        fix=tuple(fix),
        wants=tuple((b, 1.0) for b in WAITS),
    )


def _stalled(m: Metrics, waits: list[Stall]) -> tuple[str, ...]:
    """The steps that stood still while it waited, where there were, and what is not known."""
    led = m.ledger
    lines = []
    if waits and led is not None and m.steady is not None:
        each = sum(st.excess_s for st in waits) / len(waits)
        lines.append(
            f"{plural(len(waits), 'step')} of the loop's own code stood still for {ms(each)} "
            f"beyond a median step ({ms(m.steady.p50_s)}) while it waited: "
            f"{led.share('stall_wait'):.0%} of the steady time"
        )
    lines.append(
        "what a fix gains is not measured: the job's other threads may work while this one waits"
    )
    return tuple(lines)


def _intra_op_threads(m: Metrics) -> int | None:
    n = (m.activity.precision or {}).get("intra_op_threads")
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None


def _quota(s: CpuStarvation, threads: int | None, workers: int) -> tuple[str, list[str]]:
    quota = s.quota or 1.0
    cause = (
        f"the cgroup's CPU quota ({quota:g} CPU{'' if quota == 1 else 's'}) stopped the job in "
        f"{s.throttled:.0%} of its 100 ms periods"
    )
    if s.throttled_s is not None:
        cause += f" ({s.throttled_s:.1f} s of throttling in the steady window)"
    if s.job_cpus is not None:
        cause += f"; its processes used {s.job_cpus:.1f} CPUs on average"
    fits = max(1, math.floor(quota) - workers)
    if threads is not None and threads <= fits:
        # its threads fit the quota already: the job needs more CPU than it is given
        return cause, [
            "raise the quota (docker --cpus, the Kubernetes CPU limit): the job's threads fit "
            "it and still need more",
            "or do less CPU work a step (move it to the GPU, or into DataLoader workers on CPUs "
            "outside the quota)",
        ]
    host = f"the host's {s.machine_total} cores" if s.machine_total else "the host's cores"
    if threads is not None:  # (attach reads no thread count: the fix is said all the same)
        cause += f", with torch's {threads} intra-op threads" + (
            f" and {workers} busy DataLoader workers" if workers else ""
        )
    return cause, [
        f"size the job to the quota, not to {host}: torch.set_num_threads({fits}) (or "
        f"OMP_NUM_THREADS={fits}); torch starts an intra-op thread per core it sees"
        + (f", and the {workers} busy workers need their share" if workers else ""),
        "or raise the quota: docker --cpus, the Kubernetes CPU limit",
    ]


def _own_threads(s: CpuStarvation, threads: int | None, workers: int) -> bool:
    """The job's own threads take the CPUs: more of them than CPUs where the count is known
    (attach, without the probe, goes by the CPU use alone), and the job keeps its CPUs busy, or
    nothing else on the machine uses a CPU to speak of. Threads that take every CPU for each
    matmul and wait between them leave the mean below the CPUs while the loop's thread waits
    in each burst: 8 on 2 CPUs used 1.49 of them, the main thread waiting 36 % of the time.
    More intra-op threads than CPUs are a cause whatever else runs: 2 on a job pinned to 1 CPU
    ran 1.7 steps/s against 1 thread's 105, beside other load."""
    if not s.usable or s.job_cpus is None:
        return False
    if threads is not None and threads + workers <= s.usable:
        return False
    if threads is not None and threads > s.usable:
        return True
    return s.job_cpus >= BUSY * s.usable or _others_cpus(s) < OTHERS_MIN


def _others_cpus(s: CpuStarvation) -> float:
    """CPUs the machine's other processes took from the CPUs the job may use, on average (inf:
    not measured); trainprof's own (its sampler, py-spy) are not other processes: the cause is
    said apart from them."""
    others = s.others_on_its_cpus
    return math.inf if others is None else others


def _own(s: CpuStarvation, threads: int | None, workers: int) -> tuple[str, list[str]]:
    parts = [f"torch's {threads} intra-op threads" if threads else "its threads"]
    if workers:
        parts.append(f"{workers} busy DataLoader workers")
    job = s.job_cpus or 0.0
    cause = (
        f"the job's processes used {job:.1f} of the {s.usable} CPUs it may use"
        + (
            f" on average, the rest of the machine {s.others_cpus or 0.0:.1f}"
            if job < BUSY * (s.usable or 1)
            else ""
        )
        + f": {' and '.join(parts)} compete for them"
    )
    n = max(1, (s.usable or 1) - workers)
    fix = (
        f"size torch's threads to the {s.usable} CPUs"
        + (f", less one for each of the {workers} busy workers" if workers else "")
        + f": torch.set_num_threads({n}) (or OMP_NUM_THREADS={n}); torch starts an intra-op "
        "thread per core it sees"
    )
    return cause, [fix]


def _others(s: CpuStarvation) -> bool:
    if s.machine_cpus is None or not s.machine_total:
        return False
    busy = s.machine_cpus >= MACHINE_FULL * s.machine_total
    return busy and _others_cpus(s) >= OTHERS_MIN


def _trainprof_itself(s: CpuStarvation) -> bool:
    """The machine is full and trainprof's own processes take a CPU's share of it (py-spy
    sampling many processes on a small machine): the tool is the competition, said as such."""
    if s.own_cpus is None or s.machine_cpus is None or not s.machine_total:
        return False
    busy = s.machine_cpus >= MACHINE_FULL * s.machine_total
    return busy and s.own_cpus >= OTHERS_MIN and s.own_cpus >= _others_cpus(s)


def _trainprof(s: CpuStarvation) -> tuple[str, list[str]]:
    machine = s.machine_cpus or 0.0
    cause = (
        f"the machine's {s.machine_total} CPUs were {machine / (s.machine_total or 1):.0%} busy, "
        f"{s.own_cpus or 0.0:.1f} CPUs of it trainprof's own (its sampler and py-spy)"
    )
    return cause, [
        "sample less: `--no-stacks` (no py-spy) or a longer `--interval` (attach: a lower "
        "`--rate`); on a machine this busy trainprof's sampling competes with the job",
    ]


def _other_processes(s: CpuStarvation, threads: int | None) -> tuple[str, list[str]]:
    machine = s.machine_cpus or 0.0
    own = s.own_cpus or 0.0
    cause = (
        f"{s.got()} ({machine / (s.machine_total or 1):.0%} busy in all"
        + (f"; trainprof's own {own:.1f} apart" if own >= 0.05 else "")
        + ")"
    )
    return cause, _for_the_cpus_left(s, threads)


def _for_the_cpus_left(s: CpuStarvation, threads: int | None) -> list[str]:
    """Size the job's threads to the CPUs the others leave: unlike a pin, it keeps every CPU
    once the load goes. A pin, where said, says that risk (rules/_fixes.py)."""
    cpus = s.usable or s.machine_total or 1
    left = max(1, math.floor(cpus - _others_cpus(s)))
    move = (
        "or run it where its CPUs are its own: stop or move the other work (another job, a "
        "data-preparation script)"
    )
    if threads is not None and threads <= left:
        return [
            move.removeprefix("or "),
            "or pin each job to CPUs of its own (taskset -c, cpusets)",
        ]
    return [
        f"size the job's threads to the CPUs the other processes leave it: "
        f"torch.set_num_threads({left}) (or OMP_NUM_THREADS={left}) for "
        f"{'its' if threads is None else f'its {threads}'} intra-op threads, on the {cpus} CPUs "
        "it may use; the job keeps every CPU when the other load goes",
        move,
        "or pin each job to CPUs of its own (taskset -c, cpusets)",
    ]
