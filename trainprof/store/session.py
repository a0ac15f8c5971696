"""A Session: everything one run directory holds, loaded into memory-light structures.

Samples become per-tick columns (the runner takes one every 0.5 s; a day is ~170k ticks), and
per-process memory/fd series keyed by pid, so analysis never re-reads files.
"""

from __future__ import annotations

import json
import os
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainprof.store.dumps import ProcessDump
from trainprof.store.dumps import parse as parse_dumps
from trainprof.store.events import ProcessLog, load_processes
from trainprof.store.rundir import META, SAMPLES, STDERR_LOG, STDOUT_LOG, read_json
from trainprof.store.stacks import StackSpan, load_spans

OUTPUT_TAIL_BYTES = 256 * 1024


@dataclass
class ProcSeries:
    """One process as seen by the sampler."""

    pid: int
    name: str = ""
    t: array[float] = field(default_factory=lambda: array("d"))
    rss: array[float] = field(default_factory=lambda: array("d"))
    uss: array[float] = field(default_factory=lambda: array("d"))  # NaN when unavailable
    cpu: array[float] = field(default_factory=lambda: array("d"))  # NaN when unavailable
    max_fds: int | None = None
    nofile: tuple[int, int] | None = None


@dataclass
class Samples:
    """Per tick: time, CPU of the job's tree, RSS of the tree, swap, /dev/shm, memory, GPU."""

    t: array[float] = field(default_factory=lambda: array("d"))
    tree_cpu: array[float] = field(default_factory=lambda: array("d"))
    tree_rss: array[float] = field(default_factory=lambda: array("d"))
    swap_used: array[float] = field(default_factory=lambda: array("d"))
    swap_in_bps: array[float] = field(default_factory=lambda: array("d"))
    swap_out_bps: array[float] = field(default_factory=lambda: array("d"))
    shm_used: array[float] = field(default_factory=lambda: array("d"))
    mem_available: array[float] = field(default_factory=lambda: array("d"))
    gpu_util: array[float] = field(
        default_factory=lambda: array("d")
    )  # mean over GPUs, NaN if none
    shm_total: int | None = None
    mem_total: int | None = None
    swap_total: int | None = None
    gpu_unavailable: str | None = None
    gpu_count: int = 0
    procs: dict[int, ProcSeries] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.t)

    def add(self, row: dict[str, Any]) -> None:
        nan = float("nan")
        t = float(row.get("t", nan))
        procs = [p for p in row.get("procs") or [] if not p.get("denied")]
        cpus = [p["cpu"] for p in procs if p.get("cpu") is not None]
        self.t.append(t)
        self.tree_cpu.append(sum(cpus) if cpus else nan)
        self.tree_rss.append(float(sum(p.get("rss") or 0 for p in procs)) if procs else nan)
        swap = row.get("swap") or {}
        self.swap_total = swap.get("total", self.swap_total)
        self.swap_used.append(_num(swap.get("used")))
        self.swap_in_bps.append(_num(swap.get("in_bps")))
        self.swap_out_bps.append(_num(swap.get("out_bps")))
        shm = row.get("shm") or {}
        self.shm_total = shm.get("total", self.shm_total)
        self.shm_used.append(_num(shm.get("used")))
        mem = row.get("mem") or {}
        self.mem_total = mem.get("total", self.mem_total)
        self.mem_available.append(_num(mem.get("available")))
        gpu = row.get("gpu")
        if isinstance(gpu, list):
            self.gpu_count = max(self.gpu_count, len(gpu))
            utils = [g["util"] for g in gpu if g.get("util") is not None]
            self.gpu_util.append(sum(utils) / len(utils) if utils else nan)
            if not utils and gpu:
                self.gpu_unavailable = gpu[0].get("util_unavailable", "utilization not reported")
        else:
            self.gpu_util.append(nan)
            if isinstance(gpu, dict):
                self.gpu_unavailable = gpu.get("unavailable") or self.gpu_unavailable
        for p in procs:
            self._add_proc(t, p)

    def _add_proc(self, t: float, p: dict[str, Any]) -> None:
        pid = int(p["pid"])
        s = self.procs.get(pid)
        if s is None:
            s = self.procs[pid] = ProcSeries(pid, str(p.get("name") or ""))
        s.t.append(t)
        s.rss.append(_num(p.get("rss")))
        s.uss.append(_num(p.get("uss")))
        s.cpu.append(_num(p.get("cpu")))
        fds = p.get("fds")
        if fds is not None:
            s.max_fds = max(s.max_fds or 0, int(fds))
        if p.get("nofile"):
            soft, hard = p["nofile"]
            s.nofile = (int(soft), int(hard))


def _num(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) else float("nan")


@dataclass
class Session:
    run_dir: str
    meta: dict[str, Any]
    processes: list[ProcessLog]
    samples: Samples
    stdout_tail: str = ""
    stderr_tail: str = ""
    spans: list[StackSpan] = field(default_factory=list)
    source: dict[tuple[str, int], str] = field(default_factory=dict)  # user lines in the spans
    hang_dumps: list[ProcessDump] = field(default_factory=list)  # stacks when the job hung

    @property
    def primary(self) -> ProcessLog | None:
        """The process whose steps describe the job: most steps (rank 0 first), else most batches."""
        candidates = [p for p in self.processes if p.role != "worker"]
        if not candidates:
            return None

        def weight(p: ProcessLog) -> tuple[int, int, int, int]:
            rank0 = 1 if p.header.get("rank") in (0, None) else 0
            return (p.n_steps, len(p.batches["t"]), rank0, -p.pid)

        return max(candidates, key=weight)

    @property
    def workers(self) -> list[ProcessLog]:
        return [p for p in self.processes if p.role == "worker"]

    @classmethod
    def load(cls, run_dir: str | Path) -> Session:
        run_dir = Path(run_dir)
        meta_path = run_dir / META
        meta = read_json(meta_path) if meta_path.is_file() else {}
        samples = Samples()
        path = run_dir / SAMPLES
        if path.is_file():
            with open(path, encoding="utf-8") as f:
                for line in f:
                    try:
                        samples.add(json.loads(line))
                    except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                        continue  # a torn line from a killed runner
        stacks = meta.get("stacks") or {}
        spans: list[StackSpan] = []
        for chunk in stacks.get("chunks") or []:
            spans.extend(load_spans(run_dir / chunk["file"], float(chunk["started_at"])))
        hang_file = (meta.get("hang") or {}).get("stacks_file")
        dumps = parse_dumps(_tail(run_dir / hang_file)) if hang_file else []
        return cls(
            run_dir=str(run_dir),
            meta=meta,
            hang_dumps=dumps,
            spans=spans,
            source=_source_lines(spans),
            processes=load_processes(str(run_dir)),
            samples=samples,
            stdout_tail=_tail(run_dir / STDOUT_LOG),
            stderr_tail=_tail(run_dir / STDERR_LOG),
        )


def _source_lines(spans: list[StackSpan]) -> dict[tuple[str, int], str]:
    """The text of every line the stacks name, so rules can tell a print() from a matmul."""
    import linecache

    out: dict[tuple[str, int], str] = {}
    for span in spans:
        for _name, path, line in span.frames:
            key = (path, line)
            if key not in out:
                try:
                    out[key] = linecache.getline(path, line).strip()
                except ValueError:  # a torn path from a non-blocking sample ("embedded null byte")
                    out[key] = ""
    return out


def _tail(path: Path) -> str:
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            f.seek(max(0, size - OUTPUT_TAIL_BYTES))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def is_run_dir(path: str | Path) -> bool:
    return os.path.isfile(os.path.join(path, META))
