"""Helpers the crash signatures share: where in the user's code a line was raised, in which
worker, how near host memory was to its limit, and the finding itself."""

from __future__ import annotations

from dataclasses import dataclass

from trainprof.analysis.crash.row import CrashContext, Hit
from trainprof.analysis.crash.traceback import Block, Doc, Frame
from trainprof.analysis.crash.units import fmt_bytes, measured_count, pct
from trainprof.analysis.findings import Finding, Severity


def innermost_user(blocks: tuple[Block | None, ...]) -> Frame | None:
    for block in blocks:
        if block is None:
            continue
        for frame in reversed(block.frames):
            if frame.is_user:
                return frame
    return None


def blocks_up(doc: Doc, block: Block | None) -> tuple[Block | None, ...]:
    """The block and the blocks that re-raised it (worker traceback first, then the main one)."""
    chain: list[Block | None] = [block]
    while block is not None and block.parent is not None and len(chain) < 8:
        block = doc.blocks[block.parent]
        chain.append(block)
    return tuple(chain)


def code_where(doc: Doc, hit: Hit) -> Frame | None:
    return innermost_user(blocks_up(doc, hit.block))


def loop_where(doc: Doc, hit: Hit | None = None) -> str | None:
    """For failures of the loader itself: the user's code that raised it (in a worker or not),
    else the line that pulled the batch (the user frame just above DataLoader ``__next__``)."""
    if hit is not None and hit.block is not None:
        own = innermost_user((hit.block,))
        if own is not None and (hit.block.wrapped or own is hit.block.frames[-1]):
            return own.where
    for block in reversed(doc.blocks):
        for n, frame in enumerate(block.frames):
            if frame.func == "__next__" and "data" in frame.path and n > 0:
                above = block.frames[n - 1]
                if above.is_user:
                    return above.where
    return None


def in_worker(hit: Hit) -> str | None:
    if hit.block is None or not hit.block.wrapped:
        return None
    if hit.block.worker is not None:
        return f"DataLoader worker {hit.block.worker}"
    return "a DataLoader worker"


def frame_funcs(block: Block | None) -> set[str]:
    return {frame.func for frame in block.frames} if block is not None else set()


@dataclass(frozen=True)
class Pressure:
    near: bool | None  # None: memory was not measured
    evidence: tuple[str, ...]


def memory_pressure(ctx: CrashContext) -> Pressure:
    """Whether host memory was near its limit, from whatever was measured (never from absence)."""
    total = measured_count(ctx.mem_total_bytes) or None
    available = measured_count(ctx.mem_available_min_bytes)
    job = measured_count(ctx.job_peak_rss_bytes)
    worker = measured_count(ctx.worker_peak_rss_bytes)
    workers = measured_count(ctx.num_workers)
    evidence: list[str] = []
    near: bool | None = None
    if total is not None and available is not None:
        evidence.append(
            f"system memory available fell to {fmt_bytes(available)} of {fmt_bytes(total)} "
            f"({pct(available, total)} left)"
        )
        near = available <= max(min(0.05 * total, 2 * (1 << 30)), 256 * (1 << 20))
    if total is not None and job is not None:
        evidence.append(f"job peak RSS {fmt_bytes(job)} ({pct(job, total)} of {fmt_bytes(total)})")
        near = bool(near) or job >= 0.9 * total
    if worker is not None:
        if workers:
            together = worker * workers
            line = f"each DataLoader worker peaked at {fmt_bytes(worker)} RSS ({workers} workers"
            line += f", {fmt_bytes(together)} together, counting pages they share)"
        else:
            line = f"a DataLoader worker peaked at {fmt_bytes(worker)} RSS"
        evidence.append(line)
    return Pressure(near, tuple(evidence))


def make_finding(
    id: str,
    severity: Severity,
    title: str,
    evidence: list[str],
    fix: list[str],
    where: str | None,
) -> Finding:
    unique = tuple(dict.fromkeys(e for e in evidence if e))
    return Finding(id, severity, title, unique, tuple(dict.fromkeys(fix)), None, where)
