"""What moved while attach sampled the job: for each process py-spy recorded (the training
process, the other ranks, DataLoader workers and any other Python child), the stack its main
thread held longest and for what share of its sampled time; what the job's processes read and
wrote over the window, and how much their memory changed; the CPUs they used. A hung job holds
one stack in every process and reads, writes and allocates nothing; a working one moves one or
another (the hang verdict, analysis/crash/still.still_finding, judges it). Pure: reads the
Session and the stacks analysis/from_stacks.py loaded."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trainprof.analysis.outside_view import HeldStack, Stillness
from trainprof.analysis.stats import finite, mean_between
from trainprof.store.session import Session
from trainprof.store.stacks import Frame, StackSpan


def stillness(
    session: Session,
    main_spans: Sequence[StackSpan],
    worker_spans: Mapping[int, Sequence[StackSpan]],
    target_spans: Sequence[tuple[dict[str, Any], Sequence[StackSpan]]],
) -> Stillness | None:
    """``main_spans``: the analysed process's; ``target_spans``: every attached process's (the
    ranks of a torchrun job, that one among them). None when the main process has no stacks
    (nothing to judge)."""
    att: dict[str, Any] = session.meta.get("attach") or {}
    if not main_spans:
        return None
    window = (main_spans[0].t0, main_spans[-1].t1)
    pid = int(att.get("pid") or 0)
    raw = att.get("targets")
    targets: list[Any] = raw if isinstance(raw, list) else []
    own = next((t for t in targets if isinstance(t, dict) and t.get("pid") == pid), {})
    sampled: list[tuple[str, int, Sequence[StackSpan]]] = [(_role(own), pid, main_spans)]
    for t, rank_spans in target_spans:  # the other ranks of a torchrun job
        if int(t.get("pid") or 0) != pid:
            sampled.append((_role(t), int(t.get("pid") or 0), rank_spans))
    sampled += [("worker", p, spans) for p, spans in sorted(worker_spans.items())]
    held = []
    for role, p, spans in sampled:
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
        io_bytes=_moved(att.get("io_bytes")),
        rss_change=int(max(rss) - min(rss)) if rss else None,
        cpus=None if tree is None else tree / 100,
    )


def _role(target: dict[str, Any]) -> str:
    """A target's role: "rank N" for a rank of a torchrun job, else "main" (the one process
    attached to)."""
    rank = target.get("rank")
    return f"rank {rank}" if isinstance(rank, int) and not isinstance(rank, bool) else "main"


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


def _moved(raw: Any) -> int | None:
    """Bytes read and written between the first and the last reading; None where either was
    unread, or the second is lower (processes that ended took their counts with them)."""
    if not isinstance(raw, list) or len(raw) != 2:
        return None
    a, b = raw
    if not isinstance(a, int) or not isinstance(b, int) or b < a:
        return None
    return b - a


def _cpus(session: Session, pid: int, window: tuple[float, float]) -> float | None:
    series = session.samples.procs.get(pid)
    if series is None:
        return None
    percent = mean_between(series.t, series.cpu, *window)
    return None if percent is None else percent / 100
