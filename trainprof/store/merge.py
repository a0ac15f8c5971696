"""The nodes of one multi-node job, each recorded by its own ``trainprof run``, as one Session.

Each node's clock is its own: event times are µs since each process's ``t0`` on that node's
monotonic clock, and the sampler's ticks are on the same clock. Every event file header also
holds ``wall0``, the wall-clock time at ``t0``, so ``wall0 - t0`` maps a node's monotonic
clock to wall time; the difference between two nodes' maps aligns them, as well as their wall
clocks agree (NTP: milliseconds). Then, because synchronous data-parallel ranks finish every
optimizer step together (the step ends after the all-reduce that every rank takes part in),
the median gap between the same steps' ends on the base node's rank and on each other node's
rank refines the alignment when the wall clocks disagree (a node without NTP).

The base node is the one that holds global rank 0: its run record, stacks (py-spy follows
rank 0 at the full rate) and host samples describe the job; every other node adds its processes
(shifted onto the base clock, with their node index in the header), its ranks' stacks (shifted
too) and its own host samples, kept apart (``Session.node_samples``) because pids repeat across
nodes.
"""

from __future__ import annotations

import statistics
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from trainprof.errors import TrainprofError
from trainprof.store.events import ProcessLog
from trainprof.store.session import Samples, Session
from trainprof.store.stacks import StackSpan

MAX_REFINE_S = 60.0  # a step-end gap beyond this is not one job's steps: keep the wall clock
MIN_COMMON_STEPS = 5


@dataclass(frozen=True)
class Alignment:
    offset_s: float  # add to this node's monotonic times to get the base node's
    wall_s: float  # the offset the wall clocks alone give
    by: str  # "wall clock" | "step ends"


def merge_nodes(run_dirs: Sequence[str | Path]) -> Session:
    """Load and merge; a TrainprofError (one line, exit 2) when they are not one job's nodes."""
    sessions = [Session.load(d) for d in run_dirs]
    for d, s in zip(run_dirs, sessions, strict=True):
        s.meta.setdefault("run_dir", str(d))
    return merge(sessions)


def merge(sessions: Sequence[Session]) -> Session:
    if len(sessions) < 2:
        raise TrainprofError("merging nodes needs at least two run directories")
    for s in sessions:
        if not any(p.role == "rank" for p in s.processes):
            raise TrainprofError(
                f"{s.meta.get('run_dir')} holds no torchrun rank: only the nodes of one "
                "torchrun job merge (one `trainprof run -- torchrun ...` per node)"
            )
    worlds: set[int] = {
        w
        for s in sessions
        for p in s.processes
        if p.role == "rank" and isinstance(w := p.header.get("world_size"), int)
    }
    if len(worlds) > 1:
        raise TrainprofError(
            f"these runs are not one job's nodes: their ranks have different world sizes "
            f"({', '.join(str(w) for w in sorted(worlds))})"
        )
    base_at = next(
        (
            i
            for i, s in enumerate(sessions)
            for p in s.processes
            if p.role == "rank" and p.header.get("rank") == 0 and p.n_steps
        ),
        0,
    )
    base = sessions[base_at]
    seen: dict[int, int] = {}
    for i, s in enumerate(sessions):
        for p in s.processes:
            r = p.header.get("rank")
            # only ranks that trained: a launcher that inherited RANK (a PyTorchJob pod's
            # index) is not one
            if p.role == "rank" and isinstance(r, int) and p.n_steps:
                if r in seen and seen[r] != i:
                    raise TrainprofError(
                        f"rank {r} is in two of these runs ({s.meta.get('run_dir')} and "
                        f"{sessions[seen[r]].meta.get('run_dir')}): not one job's nodes"
                    )
                seen[r] = i
    processes: list[ProcessLog] = []
    node_samples: dict[int, Samples] = {}
    rank_spans: dict[int, list[StackSpan]] = {}
    nodes_meta = []
    for i, s in enumerate(sessions):
        al = Alignment(0.0, 0.0, "base") if i == base_at else align(base, s)
        for p in s.processes:
            p.header = {**p.header, "t0": p.t0 + al.offset_s, "node": i}
            processes.append(p)
        node_samples[i] = _shifted(s.samples, al.offset_s)
        for rank, spans in s.rank_spans.items():  # every node samples its own ranks
            rank_spans[rank] = [
                replace(x, t0=x.t0 + al.offset_s, t1=x.t1 + al.offset_s) for x in spans
            ]
        nodes_meta.append(
            {
                "node": i,
                "run_dir": s.meta.get("run_dir"),
                "ranks": sorted(
                    r
                    for p in s.processes
                    if p.role == "rank" and isinstance(r := p.header.get("rank"), int) and p.n_steps
                ),
                "exit_code": s.meta.get("exit_code"),
                "offset_s": round(al.offset_s, 6),
                "wall_offset_s": round(al.wall_s, 6),
                "aligned_by": al.by,
            }
        )
    meta = dict(base.meta)
    meta["nodes"] = nodes_meta
    codes = [s.meta.get("exit_code") for s in sessions]
    failed = [c for c in codes if c not in (0, None)]
    meta["exit_code"] = failed[0] if failed else (None if None in codes else 0)
    walls = [w for s in sessions if isinstance(w := s.meta.get("wall_s"), (int, float))]
    meta["wall_s"] = max(walls) if walls else None
    return Session(
        run_dir=base.run_dir,
        meta=meta,
        processes=processes,
        samples=node_samples[base_at],
        stdout_tail="\n".join(s.stdout_tail for s in sessions),
        stderr_tail="\n".join(s.stderr_tail for s in sessions),
        spans=base.spans,
        rank_spans=rank_spans,
        source={k: v for x in sessions for k, v in x.source.items()},
        hang_dumps=[d for s in sessions for d in s.hang_dumps],
        node_samples=node_samples,
    )


def _clock_map(s: Session) -> float | None:
    """wall - monotonic on this node (the median over its processes' headers)."""
    maps = [
        float(p.header["wall0"]) - p.t0
        for p in s.processes
        if isinstance(p.header.get("wall0"), (int, float))
    ]
    return statistics.median(maps) if maps else None


def align(base: Session, node: Session) -> Alignment:
    """The offset that puts ``node``'s monotonic times on ``base``'s clock."""
    b, n = _clock_map(base), _clock_map(node)
    wall = (n - b) if b is not None and n is not None else 0.0
    refined = _by_steps(base, node, wall)
    if refined is not None:
        return Alignment(refined, wall, "step ends")
    return Alignment(wall, wall, "wall clock")


def _by_steps(base: Session, node: Session, guess: float) -> float | None:
    """The offset that lines up the ends of the same optimizer steps on the two nodes' first
    ranks (they end together: after the all-reduce every rank waits in)."""
    a, b = _first_rank(base), _first_rank(node)
    if a is None or b is None:
        return None
    n = min(a.n_steps, b.n_steps)
    if n < MIN_COMMON_STEPS:
        return None
    ta, tb = a.steps["t"], b.steps["t"]
    gaps = [(a.t0 + ta[i] / 1e6) - (b.t0 + tb[i] / 1e6) for i in range(n)]
    offset = statistics.median(gaps)
    return offset if abs(offset - guess) <= MAX_REFINE_S else None


def _first_rank(s: Session) -> ProcessLog | None:
    ranks = [
        p
        for p in s.processes
        if p.role == "rank" and isinstance(p.header.get("rank"), int) and p.n_steps
    ]
    return min(ranks, key=lambda p: p.header["rank"]) if ranks else None


def _shifted(samples: Samples, offset: float) -> Samples:
    """The node's host samples on the base clock (a copy; only the tick times move)."""
    if offset == 0.0:
        return samples
    out = Samples(**{k: v for k, v in vars(samples).items()})
    out.t = array("d", (t + offset for t in samples.t))
    out.procs = {
        pid: replace(s, t=array("d", (t + offset for t in s.t))) for pid, s in samples.procs.items()
    }
    out.gpu_by_index = {
        i: (array("d", (t + offset for t in ts)), us)
        for i, (ts, us) in samples.gpu_by_index.items()
    }
    return out
