"""What was sampled from outside the job (run.json's ``attach`` record), read once into plain data.

`trainprof attach` records the job's processes with py-spy instead of timing steps inside it:
each sampled process (the one given, or every rank of a torchrun job), the stack files of their
main threads and of their DataLoader workers, the sampling rate, and the bytes the job read and
wrote over the window. ``read`` parses that record and loads every stack file it names, by pid;
the analysis reads the result, never the record or a file.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainprof.store.source_text import source_lines
from trainprof.store.stacks import StackSpan, load_spans

DEFAULT_RATE_HZ = 100  # py-spy's rate where the record does not say

# A stack file's name and the monotonic time its recording started → its spans.
Loader = Callable[[str, float], list[StackSpan]]


@dataclass(frozen=True)
class SampledProcess:
    """One process py-spy sampled from outside: the job's main process, or a rank of it."""

    pid: int  # 0: not recorded
    rank: int | None  # its torchrun rank (None: not a rank of a torchrun job)
    spans: tuple[StackSpan, ...]  # its main thread's stacks (empty: none recorded)
    py_spy_restarts: int = 0  # py-spy stopped by itself on it and was started again
    # the text of each line its stacks name
    source: dict[tuple[str, int], str] = field(default_factory=dict, compare=False)

    @property
    def role(self) -> str:
        """``rank N`` for a rank of a torchrun job, else ``main`` (the one process sampled)."""
        return "main" if self.rank is None else f"rank {self.rank}"


@dataclass(frozen=True)
class SampledWorker:
    """One DataLoader worker (or other Python child) py-spy found under a sampled process."""

    pid: int  # 0: not recorded
    spans: tuple[StackSpan, ...]  # its main thread's stacks (empty: none recorded)


@dataclass(frozen=True)
class Sampled:
    """Everything recorded from outside the job: the processes sampled, their workers, the rate."""

    pid: int | None  # the process analysed: the first sampled (rank 0 of several)
    given_pid: int | None  # the pid the user gave (a launcher's, where it started the ranks)
    note: str | None  # how the given pid led to the sampled ones
    rate_hz: int  # py-spy's sampling rate
    duration_s: float | None  # the window asked for (None: not recorded)
    processes: tuple[SampledProcess, ...]  # in the order sampled: the analysed one first
    workers: tuple[SampledWorker, ...]  # one per stack file of a child process
    target_exit: str | None  # "exited during sampling, after N s" (None: it ran on)
    io_bytes: tuple[int, int] | None  # the job's bytes read and written at start and end

    @property
    def main(self) -> SampledProcess | None:
        """The analysed process's record (None where none was recorded)."""
        return self.processes[0] if self.processes else None

    def worker_spans(self) -> dict[int, list[StackSpan]]:
        """Each worker's main-thread stacks by pid, in the order first recorded."""
        out: dict[int, list[StackSpan]] = {}
        for w in self.workers:
            out.setdefault(w.pid, []).extend(w.spans)
        return out


def reads_once(run_dir: Path) -> Loader:
    """A loader of the run directory's stack files that reads each file once."""
    cache: dict[tuple[str, float], list[StackSpan]] = {}

    def load(name: str, started_at: float) -> list[StackSpan]:
        if (name, started_at) not in cache:
            cache[name, started_at] = load_spans(run_dir / name, started_at)
        return cache[name, started_at]

    return load


def read(record: object, run_dir: str | Path, load: Loader | None = None) -> Sampled | None:
    """run.json's ``attach`` record as a Sampled, every stack file it names loaded (through
    ``load``, else from ``run_dir``); None where there is no such record."""
    if not isinstance(record, dict):
        return None
    loader = load or reads_once(Path(run_dir))
    processes = tuple(_process(t, loader) for t in _dicts(record.get("targets")))
    # a worker's trace holds absolute times (py-spy's split by pid): no start to add
    workers = tuple(
        SampledWorker(_int(w.get("pid")) or 0, _spans(loader, w.get("file"), 0.0))
        for w in _dicts(record.get("workers"))
    )
    pid = _int(record.get("pid"))
    rate = _num(record.get("rate_hz"))
    return Sampled(
        pid=pid,
        given_pid=_int(record.get("given_pid")) or pid,
        note=_str(record.get("note")),
        rate_hz=int(rate) if rate else DEFAULT_RATE_HZ,
        duration_s=_num(record.get("duration_s")),
        processes=processes,
        workers=workers,
        target_exit=_str(record.get("target_exit")),
        io_bytes=_pair(record.get("io_bytes")),
    )


def _process(target: dict[str, Any], load: Loader) -> SampledProcess:
    spans = _spans(load, target.get("file"), _num(target.get("started_at")) or 0.0)
    return SampledProcess(
        pid=_int(target.get("pid")) or 0,
        rank=_int(target.get("rank")),
        spans=spans,
        py_spy_restarts=_int(target.get("py_spy_restarts")) or 0,
        source=source_lines(spans),
    )


def _spans(load: Loader, file: object, started_at: float) -> tuple[StackSpan, ...]:
    """A stack file named in the record, by its name inside the run directory."""
    if not isinstance(file, str):
        return ()
    name = Path(file).name
    if name in ("", ".", ".."):
        return ()
    return tuple(load(name, started_at))


def _dicts(raw: object) -> list[dict[str, Any]]:
    return [x for x in raw if isinstance(x, dict)] if isinstance(raw, list) else []


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _num(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def _str(v: object) -> str | None:
    return v if isinstance(v, str) else None


def _pair(raw: object) -> tuple[int, int] | None:
    """Two counter readings (start, end); None where either was not read."""
    if not isinstance(raw, list) or len(raw) != 2:
        return None
    a, b = _int(raw[0]), _int(raw[1])
    return None if a is None or b is None else (a, b)
