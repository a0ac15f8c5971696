"""What moved while attach sampled the job: for each process py-spy recorded (the training
process, the other ranks, DataLoader workers and any other Python child), the stack its main
thread held longest and for what share of its sampled time; what the job's processes read and
wrote over the window, and how much their memory changed; the CPUs they used. A hung job holds
one stack in every process and reads, writes and allocates nothing; a working one moves one or
another (the hang verdict, analysis/crash/still.still_finding, judges it). Pure: reads the
Session and what it sampled (store/sampled.py)."""

from __future__ import annotations

from collections.abc import Sequence

from trainprof.analysis.outside_view import HeldStack, Stillness
from trainprof.analysis.stats import finite, mean_between
from trainprof.store.sampled import Sampled
from trainprof.store.session import Session
from trainprof.store.stacks import Frame, StackSpan


def stillness(
    session: Session, sampled: Sampled, main_spans: Sequence[StackSpan]
) -> Stillness | None:
    """``main_spans``: the analysed process's; ``sampled``: every process sampled (the ranks of
    a torchrun job, that one among them) and their DataLoader workers. None when the main
    process has no stacks (nothing to judge)."""
    if not main_spans:
        return None
    window = (main_spans[0].t0, main_spans[-1].t1)
    pid = sampled.pid or 0
    own = next((p for p in sampled.processes if p.pid == pid), None)
    sampled_spans: list[tuple[str, int, Sequence[StackSpan]]] = [
        (own.role if own else "main", pid, main_spans)
    ]
    for proc in sampled.processes:  # the other ranks of a torchrun job
        if proc.pid != pid:
            sampled_spans.append((proc.role, proc.pid, proc.spans))
    workers = sorted(sampled.worker_spans().items())
    sampled_spans += [("worker", p, spans) for p, spans in workers]
    held = []
    for role, p, spans in sampled_spans:
        most = most_held(spans)
        if most is not None:
            series = session.samples.procs.get(p)
            fds, nofile = (series.max_fds, series.nofile) if series else (None, None)
            held.append(
                HeldStack(role, p, most[0], most[1], _cpus(session, p, window), fds, nofile)
            )
    samples = session.samples
    tree = mean_between(samples.t, samples.tree_cpu, *window)
    lo, hi = window
    rss = finite(r for t, r in zip(samples.t, samples.tree_rss, strict=True) if lo <= t <= hi)
    return Stillness(
        window_s=window[1] - window[0],
        processes=tuple(held),
        io_bytes=_moved(sampled.io_bytes),
        rss_change=int(max(rss) - min(rss)) if rss else None,
        cpus=None if tree is None else tree / 100,
    )


def most_held(spans: Sequence[StackSpan]) -> tuple[tuple[Frame, ...], float] | None:
    """The stack held longest over the spans (py-spy's runs of one unchanged stack; a torn
    sample can split one run in two), and its share of their time."""
    held: dict[tuple[Frame, ...], float] = {}
    for s in spans:
        held[s.frames] = held.get(s.frames, 0.0) + (s.t1 - s.t0)
    total = sum(held.values())
    if total <= 0:
        return None
    frames, seconds = max(held.items(), key=lambda kv: kv[1])
    return frames, seconds / total


def _moved(readings: tuple[int, int] | None) -> int | None:
    """Bytes read and written between the first and the last reading; None where either was
    unread, or the second is lower (processes that ended took their counts with them)."""
    if readings is None or readings[1] < readings[0]:
        return None
    return readings[1] - readings[0]


def _cpus(session: Session, pid: int, window: tuple[float, float]) -> float | None:
    series = session.samples.procs.get(pid)
    if series is None:
        return None
    percent = mean_between(series.t, series.cpu, *window)
    return None if percent is None else percent / 100
