"""``trainprof attach``'s hang verdict: over the window sampled, every process's main thread
held one stack and the job read, wrote and allocated next to nothing (analysis/stillness.py reads
it). Told from each process's held stack as the runner's hang dumps are (hang.told), with what
only attach measures beside: the window, the I/O, the CPU, a process out of file descriptors.
Pure."""

from __future__ import annotations

from dataclasses import replace

from trainprof.analysis.attribution import is_compiling
from trainprof.analysis.crash.hang import split_dumps, told
from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.outside_view import HeldStack, Stillness
from trainprof.analysis.rules import hang as hang_rule
from trainprof.store.dumps import ProcessDump, ThreadDump
from trainprof.units import fmt_bytes, plural


def still_finding(still: Stillness, metrics: Metrics) -> Finding | None:
    """``trainprof attach``'s hang: over a window of at least ``attach_still``, every sampled
    process held one stack and the job read and wrote less than ``moved`` and its memory
    changed by less (a native call that allocates is at work); told as the runner's
    hang dumps are, from each process's held stack. None when anything moved, or the main
    process was compiling (progress). Still while its processes use CPUs, it is stuck (a
    spin-wait, or one long native call), a warning."""
    procs = still.processes
    if (
        still.window_s < hang_rule.ATTACH_STILL_S.value
        or not procs
        or any(p.share < hang_rule.ATTACH_HELD.value for p in procs)
        or (still.io_bytes is not None and still.io_bytes >= hang_rule.MOVED.value)
        or (still.rss_change is not None and still.rss_change >= hang_rule.MOVED.value)
        or is_compiling(procs[0].frames)
        or (metrics.outside is not None and metrics.outside.target_exit is not None)
    ):
        return None
    busy = still.cpus is not None and still.cpus >= hang_rule.ATTACH_BUSY.value
    dumps = [
        ProcessDump(
            p.pid,
            p.role,
            (ThreadDump("MainThread", not _busy(p, busy), tuple(reversed(p.frames))),),
            None,
        )
        for p in procs
    ]
    roles = {p.pid: p.role for p in procs}
    main_dump, worker_dumps, rank_dumps = split_dumps(dumps, roles)
    seconds = f"{still.window_s:.1f} s"
    they, their = ("it", "its") if len(procs) == 1 else ("they", "their")
    if still.io_bytes is None:
        moved = f"what {they} read and wrote could not be read (no I/O counters)"
    else:
        done = fmt_bytes(still.io_bytes) if still.io_bytes else "nothing"
        moved = f"{they} read and wrote {done} in that time"
    if still.rss_change is not None:
        change = still.rss_change
        moved += (
            f"; {their} memory {f'changed by {fmt_bytes(change)}' if change else 'kept its size'}"
        )
    used = f", and used {_cpus(still.cpus)} on average" if still.cpus is not None else ""
    least = min(p.share for p in procs)
    evidence = [
        f"for the {seconds} attach sampled, the main thread of "
        + (
            "the job's one sampled process"
            if len(procs) == 1
            else f"each of the job's {plural(len(procs), 'sampled process')}"
        )
        + " held one stack "
        f"({'in every sample' if least >= 0.995 else f'{least:.0%} of its samples or more'})"
        f"; {moved}{used}",
    ]
    tail = [
        "how long it was still before attach came is not known: the same stacks in a later "
        "attach confirm it"
        + (
            "; one long native call (a huge matrix product, a C extension) keeps as still"
            if busy
            else ""
        ),
    ]
    if busy:
        head = (
            f"The job looks stuck: no stack moved in the {seconds} sampled, yet it used "
            f"{_cpus(still.cpus or 0.0)}"
        )
    else:
        head = f"The job looks hung: nothing moved in the {seconds} sampled"
    full = [p for p in procs if p.fds is not None and p.nofile and p.fds >= p.nofile[0]]
    if full:  # a process out of descriptors: a worker that cannot send its batch, say
        evidence += [_out_of_descriptors(p) for p in full]
    finding = told(head, evidence, tail, main_dump, worker_dumps, rank_dumps, roles, metrics)
    if full:
        out = full[0]
        who = "the main process" if out.role == "main" else _role_name(out.role)
        finding = replace(
            finding,
            title=f"{head}: {who} ran out of file descriptors (ulimit -n "
            f"{out.nofile[0] if out.nofile else '?'})",
            fix=(_raise_the_limit(full), *finding.fix),
        )
    return replace(finding, severity="warning") if busy else finding


def _out_of_descriptors(p: HeldStack) -> str:
    who = "the main process" if p.role == "main" else _role_name(p.role)
    soft = p.nofile[0] if p.nofile else "?"
    return (
        f"{who} (pid {p.pid}) had {p.fds} file descriptors open, all its open-file limit allows "
        f"(ulimit -n {soft}); under torch's default file_descriptor sharing each tensor of a "
        "batch in flight holds one, and a worker out of them cannot send its batch"
    )


def _role_name(role: str) -> str:
    return "a DataLoader worker" if role == "worker" else role


def _raise_the_limit(full: list[HeldStack]) -> str:
    limits = [p.nofile for p in full if p.nofile]
    soft, hard = min(n[0] for n in limits), min(n[1] for n in limits)
    if soft < hard and hard > 0:  # (a hard limit of -1 is unlimited)
        raise_it = (
            f"`ulimit -n {min(hard, 65536)}` in the shell that starts the job (up to the hard "
            f"limit, {hard}, needs no root)"
        )
    else:
        raise_it = (
            "`ulimit -n 65536` in the shell that starts the job (raising the hard limit needs "
            "root: `nofile` in /etc/security/limits.conf; Docker: --ulimit nofile=65536:65536)"
        )
    return (
        f"restart the job with a higher open-file limit: {raise_it}; or "
        '`torch.multiprocessing.set_sharing_strategy("file_system")` at the top of the script '
        "(the lost batch is not sent again: the running job stays hung)"
    )


def _cpus(n: float) -> str:
    return f"{n:.0%} of a CPU" if n < 1 else f"{n:.1f} CPUs"


def _busy(p: HeldStack, job_busy: bool) -> bool:
    """The process itself used CPUs (where its own use was not sampled: the job's)."""
    return job_busy if p.cpus is None else p.cpus >= hang_rule.ATTACH_BUSY.value
