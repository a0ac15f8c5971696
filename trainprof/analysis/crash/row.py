"""One crash signature's row: what its builder is given (the parsed text, the row's hits, what was
measured around the failure) and what it returns."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from trainprof.analysis.crash.traceback import Block, Doc
from trainprof.analysis.findings import Finding


@dataclass(frozen=True)
class CrashContext:
    """What was measured around the failure. ``None`` means "not measured", never zero."""

    exit_code: int | None = None  # job exit code (128+N when killed by signal N)
    signal: str | None = None  # e.g. "SIGKILL"
    nofile_soft: int | None = None
    nofile_hard: int | None = None
    max_open_fds: int | None = None  # peak open fds of the job or its workers before the failure
    shm_size_bytes: int | None = None
    shm_peak_used_bytes: int | None = None
    worker_peak_rss_bytes: int | None = None
    mem_total_bytes: int | None = None  # system
    mem_available_min_bytes: int | None = None  # system
    job_peak_rss_bytes: int | None = None
    sharing_strategy: str | None = None  # torch.multiprocessing sharing strategy
    num_workers: int | None = None
    last_batch_shapes: str | None = None  # optional text if the probe saw the last batch


@dataclass(frozen=True)
class Hit:
    index: int  # line index in the normalised text
    text: str
    match: re.Match[str]
    pattern: int  # which of the row's patterns matched
    block: Block | None  # the traceback whose exception message holds the line

    @property
    def is_exception_line(self) -> bool:
        return self.block is not None and self.block.exc == self.index


@dataclass(frozen=True)
class Scan:
    doc: Doc
    ctx: CrashContext
    hits: tuple[Hit, ...]
    fired: Mapping[str, Finding]  # findings of the rows above this one


Built = tuple[Finding, tuple[Hit, ...]]  # the finding and the hits it used (claimed lines)
Build = Callable[[Scan], Built | None]


@dataclass(frozen=True)
class Signature:
    """One row: a finding id, its place in the order, literal needles, patterns, the builder."""

    id: str
    order: int  # rows are tried lowest first
    needles: tuple[str, ...]
    patterns: tuple[re.Pattern[str], ...]
    build: Build
