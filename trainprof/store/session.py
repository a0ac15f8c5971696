"""A Session: everything one run directory holds, loaded into memory-light structures.

Samples become per-tick columns (the runner takes one every 0.5 s; a day is ~170k ticks), and
per-process memory/fd series keyed by pid, so analysis never re-reads files.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from trainprof.errors import TrainprofError
from trainprof.store import gpus
from trainprof.store.dumps import ProcessDump
from trainprof.store.dumps import parse as parse_dumps
from trainprof.store.events import ProcessLog, read_processes
from trainprof.store.redact import redact_text
from trainprof.store.run_files import open_regular
from trainprof.store.rundir import META, SAMPLES, STDERR_LOG, STDOUT_LOG, read_json
from trainprof.store.sampled import Loader, Sampled, reads_once
from trainprof.store.sampled import read as read_sampled
from trainprof.store.source_text import source_lines
from trainprof.store.stacks import StackSpan

OUTPUT_TAIL_BYTES = 256 * 1024


@dataclass
class ProcSeries:
    """One process as seen by the sampler."""

    pid: int
    name: str = ""
    t: array[float] = field(default_factory=lambda: array("d"))
    rss: array[float] = field(default_factory=lambda: array("d"))
    uss: array[float] = field(default_factory=lambda: array("d"))  # NaN when unavailable
    pss: array[float] = field(default_factory=lambda: array("d"))  # NaN on a tick not read
    cpu: array[float] = field(default_factory=lambda: array("d"))  # NaN when unavailable
    # Seconds its main thread has waited, runnable, for a CPU (cumulative); NaN when unavailable
    rq_wait: array[float] = field(default_factory=lambda: array("d"))
    max_fds: int | None = None
    nofile: tuple[int, int] | None = None
    cpus: int | None = None  # the CPUs its affinity allowed, at its last reading


@dataclass
class Samples:
    """Per tick: time, CPU of the job's tree, RSS of the tree, swap, /dev/shm, memory, GPU."""

    t: array[float] = field(default_factory=lambda: array("d"))
    tree_cpu: array[float] = field(default_factory=lambda: array("d"))
    # trainprof's own processes (the runner or attach, and py-spy), % of one CPU; NaN: unread
    self_cpu: array[float] = field(default_factory=lambda: array("d"))
    tree_rss: array[float] = field(default_factory=lambda: array("d"))
    # The job's real memory: the sum of each process's latest PSS (pages shared with its forked
    # workers counted once); NaN while a process of the tick has no PSS read yet
    tree_pss: array[float] = field(default_factory=lambda: array("d"))
    # trainprof's own CPU seconds since sampling began (cumulative; NaN: unread): the process
    # that sampled (the runner or attach), and its helpers outside the job (py-spy)
    own_supervisor_s: array[float] = field(default_factory=lambda: array("d"))
    own_helpers_s: array[float] = field(default_factory=lambda: array("d"))
    swap_used: array[float] = field(default_factory=lambda: array("d"))
    swap_in_bps: array[float] = field(default_factory=lambda: array("d"))
    swap_out_bps: array[float] = field(default_factory=lambda: array("d"))
    shm_used: array[float] = field(default_factory=lambda: array("d"))
    mem_available: array[float] = field(default_factory=lambda: array("d"))
    machine_cpu: array[float] = field(default_factory=lambda: array("d"))  # % of all its CPUs
    # The job's cgroup CPU quota's counters (cumulative; NaN without a quota): its periods,
    # those it was throttled in, and the seconds it was throttled
    quota_periods: array[float] = field(default_factory=lambda: array("d"))
    quota_throttled: array[float] = field(default_factory=lambda: array("d"))
    quota_throttled_s: array[float] = field(default_factory=lambda: array("d"))
    # Mean over the job's GPUs (store/gpus.py narrows it from every GPU once the processes are
    # read), NaN if none.
    gpu_util: array[float] = field(default_factory=lambda: array("d"))
    shm_total: int | None = None
    mem_total: int | None = None
    swap_total: int | None = None
    cpu_quota: float | None = None  # CPUs the job's cgroup quota allows (None: no quota)
    gpu_unavailable: str | None = None
    gpu_count: int = 0
    procs: dict[int, ProcSeries] = field(default_factory=dict)
    # Each GPU's own utilization by NVML index: (tick times, percent), for per-rank views.
    gpu_by_index: dict[int, tuple[array[float], array[float]]] = field(default_factory=dict)
    # Each GPU's memory used by NVML index: (tick times, bytes).
    gpu_mem_by_index: dict[int, tuple[array[float], array[float]]] = field(default_factory=dict)
    gpu_uuid: dict[int, str] = field(default_factory=dict)  # NVML's UUID of each GPU
    gpu_pids: dict[int, set[int]] = field(default_factory=dict)  # PIDs NVML saw on each GPU
    job_gpus: gpus.JobGpus | None = None  # the job's GPUs, once told (store/gpus.py)
    _pss: dict[int, float] = field(default_factory=dict, repr=False)  # pid → its latest PSS

    def __len__(self) -> int:
        return len(self.t)

    def add(self, row: dict[str, Any]) -> None:
        """One sampler row. Values of the wrong type (a damaged file) read as unknown: NaN in
        the columns, None in the totals; every column still gets exactly one value per tick."""
        nan = float("nan")
        t = _num(row.get("t"))
        raw = row.get("procs")
        procs = [
            p
            for p in (raw if isinstance(raw, list) else [])
            if isinstance(p, dict) and not p.get("denied")
        ]
        cpus = [c for c in (_num(p.get("cpu")) for p in procs) if not math.isnan(c)]
        self.t.append(t)
        self.tree_cpu.append(sum(cpus) if cpus else nan)
        self.self_cpu.append(_num(row.get("self_cpu")))
        rss = (_num(p.get("rss")) for p in procs)
        self.tree_rss.append(float(sum(r for r in rss if not math.isnan(r))) if procs else nan)
        self.tree_pss.append(self._tree_pss(procs))
        own = row.get("own_s")
        own = own if isinstance(own, list) and len(own) == 2 else [None, None]
        self.own_supervisor_s.append(_num(own[0]))
        self.own_helpers_s.append(_num(own[1]))
        swap = _dict(row.get("swap"))
        self.swap_total = _total(swap, self.swap_total)
        self.swap_used.append(_num(swap.get("used")))
        self.swap_in_bps.append(_num(swap.get("in_bps")))
        self.swap_out_bps.append(_num(swap.get("out_bps")))
        shm = _dict(row.get("shm"))
        self.shm_total = _total(shm, self.shm_total)
        self.shm_used.append(_num(shm.get("used")))
        mem = _dict(row.get("mem"))
        self.mem_total = _total(mem, self.mem_total)
        self.mem_available.append(_num(mem.get("available")))
        self.machine_cpu.append(_num(row.get("cpu")))
        quota = _dict(row.get("quota"))
        allowed = _num(quota.get("cpus"))
        if not math.isnan(allowed):
            self.cpu_quota = allowed
        self.quota_periods.append(_num(quota.get("periods")))
        self.quota_throttled.append(_num(quota.get("throttled")))
        self.quota_throttled_s.append(_num(quota.get("throttled_s")))
        gpu = row.get("gpu")
        if isinstance(gpu, list):
            devices = [g for g in gpu if isinstance(g, dict)]
            self.gpu_count = max(self.gpu_count, len(gpu))
            utils = [u for u in (_num(g.get("util")) for g in devices) if not math.isnan(u)]
            for g in devices:
                index = _int(g.get("index"))
                if index is None:
                    continue
                ts, us = self.gpu_by_index.setdefault(index, (array("d"), array("d")))
                ts.append(t)
                us.append(_num(g.get("util")))
                used = _num(g.get("mem_used"))
                if not math.isnan(used):
                    mts, used_b = self.gpu_mem_by_index.setdefault(index, (array("d"), array("d")))
                    mts.append(t)
                    used_b.append(used)
                if isinstance(g.get("uuid"), str):
                    self.gpu_uuid[index] = g["uuid"]
                seen = g.get("procs")
                if isinstance(seen, dict):
                    pids = self.gpu_pids.setdefault(index, set())
                    pids.update(
                        int(k) for k in seen if isinstance(k, str) and k.isascii() and k.isdigit()
                    )
            self.gpu_util.append(sum(utils) / len(utils) if utils else nan)
            if not utils and devices:
                why = devices[0].get("util_unavailable") or "utilization not reported"
                self.gpu_unavailable = str(why)
        else:
            self.gpu_util.append(nan)
            if isinstance(gpu, dict) and gpu.get("unavailable"):
                self.gpu_unavailable = str(gpu["unavailable"])
        for p in procs:
            self._add_proc(t, p)

    def _tree_pss(self, procs: list[dict[str, Any]]) -> float:
        """The sum of the latest PSS of each process of the tick (NaN: one has none yet)."""
        total = 0.0
        for p in procs:
            pid, pss = _int(p.get("pid")), _num(p.get("pss"))
            if pid is None:
                continue
            if not math.isnan(pss):
                self._pss[pid] = pss
            latest = self._pss.get(pid)
            if latest is None:
                return float("nan")
            total += latest
        return total if procs else float("nan")

    def _add_proc(self, t: float, p: dict[str, Any]) -> None:
        pid = _int(p.get("pid"))
        if pid is None:
            return
        s = self.procs.get(pid)
        if s is None:
            s = self.procs[pid] = ProcSeries(pid, str(p.get("name") or ""))
        s.t.append(t)
        s.rss.append(_num(p.get("rss")))
        s.uss.append(_num(p.get("uss")))
        s.pss.append(_num(p.get("pss")))
        s.cpu.append(_num(p.get("cpu")))
        s.rq_wait.append(_num(p.get("rq_wait")))
        cpus = _int(p.get("cpus"))
        if cpus is not None:
            s.cpus = cpus
        fds = _int(p.get("fds"))
        if fds is not None:
            s.max_fds = max(s.max_fds or 0, fds)
        nofile = p.get("nofile")
        if isinstance(nofile, list) and len(nofile) == 2:
            soft, hard = _int(nofile[0]), _int(nofile[1])
            if soft is not None and hard is not None:
                s.nofile = (soft, hard)


def _num(v: Any) -> float:
    """A finite number as float; anything else (a string, a bool, inf, NaN) is NaN."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return float("nan")
    try:
        f = float(v)
    except OverflowError:  # an integer beyond float's range
        return float("nan")
    return f if math.isfinite(f) else float("nan")


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 63 else None


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _total(d: dict[str, Any], previous: int | None) -> int | None:
    """A size the sampler states once (its first row): kept until a row states another."""
    if "total" not in d:
        return previous
    return _int(d["total"])


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
    # Every other torchrun rank's main-thread stacks, by rank (run: a recorder per rank on the
    # node; the primary's are ``spans``), on the same clock as ``spans``.
    rank_spans: dict[int, list[StackSpan]] = field(default_factory=dict)
    # A merged multi-node run (store/merge.py): each further node's host samples, by the node
    # index in its processes' headers (pids are only unique within a node).
    node_samples: dict[int, Samples] = field(default_factory=dict)
    # What was sampled from outside the job (`trainprof attach`); None where a probe ran in it.
    sampled: Sampled | None = None
    # Event files of another version, said (not read: their steps are missing, not zero).
    unread: list[str] = field(default_factory=list)

    @property
    def primary(self) -> ProcessLog | None:
        """The process whose steps describe the job: most steps (rank 0 first), else most
        batches, else most backward passes."""
        candidates = [p for p in self.processes if p.role != "worker"]
        if not candidates:
            return None

        def weight(p: ProcessLog) -> tuple[int, int, int, int, int]:
            rank0 = 1 if p.header.get("rank") in (0, None) else 0
            return (p.n_steps, len(p.batches["t"]), len(p.backwards), rank0, -p.pid)

        return max(candidates, key=weight)

    @property
    def workers(self) -> list[ProcessLog]:
        return [p for p in self.processes if p.role == "worker"]

    @property
    def stack_rate_hz(self) -> float | None:
        """py-spy's sampling rate, the fastest of the run's chunks (long runs slow down later:
        the fastest never overstates how thin a set of samples is); None when not recorded."""
        stacks = self.meta.get("stacks")
        chunks = stacks.get("chunks") if isinstance(stacks, dict) else None
        if not isinstance(chunks, list):
            return None
        rates = [_num(c.get("rate_hz")) for c in chunks if isinstance(c, dict)]
        return max((r for r in rates if r > 0), default=None)

    @classmethod
    def load(cls, run_dir: str | Path) -> Session:
        run_dir = Path(run_dir)
        meta = _load_meta(run_dir / META)
        samples = Samples()
        path = run_dir / SAMPLES
        if os.path.lexists(path):
            with _opened(path) as f:
                for line in f:
                    try:
                        row = json.loads(line)
                    except (ValueError, RecursionError):
                        continue  # a torn line from a killed runner
                    if isinstance(row, dict):
                        samples.add(row)
        load = reads_once(run_dir)
        spans = _load_chunks(load, _stack_chunks(meta.get("stacks")))
        rank_spans: dict[int, list[StackSpan]] = {}
        for rank, chunks in _rank_stack_chunks(meta.get("stacks")).items():
            if loaded := _load_chunks(load, chunks):
                rank_spans[rank] = loaded
        hang = meta.get("hang")
        hang_file = _file_name(hang.get("stacks_file")) if isinstance(hang, dict) else None
        inline = hang.get("stacks_text") if isinstance(hang, dict) else None
        text = _tail(run_dir / hang_file) if isinstance(hang_file, str) else inline
        dumps = parse_dumps(text) if isinstance(text, str) else []
        processes, unread = read_processes(str(run_dir))
        gpus.select(samples, processes)
        return cls(
            run_dir=str(run_dir),
            meta=meta,
            hang_dumps=dumps,
            spans=spans,
            rank_spans=rank_spans,
            source=source_lines([*spans, *(s for r in rank_spans.values() for s in r)]),
            processes=processes,
            samples=samples,
            stdout_tail=_tail(run_dir / STDOUT_LOG),
            stderr_tail=_tail(run_dir / STDERR_LOG),
            sampled=read_sampled(meta.get("attach"), run_dir, load),
            unread=unread,
        )


class CorruptRunError(TrainprofError):
    """A run directory whose run.json cannot be read as a run record."""


# run.json fields the analysis reads, with the types it reads them as: a field of another type
# (a hand-edited or damaged file) is dropped, as if the runner had not recorded it.
_META_TYPES: dict[str, tuple[type, ...]] = {
    "command": (list,),
    "cwd": (str,),
    "run_dir": (str,),
    "usable_cpus": (int,),
    "interval_s": (int, float),
    "max_steps": (int,),
    "timeout_s": (int, float),
    "wall_start": (int, float),
    "t_launch": (int, float),
    "pid": (int,),
    "stacks": (dict,),
    "hang": (dict,),
    "exit_code": (int,),
    "signal": (str,),
    "wall_s": (int, float),
    "forwarded": (list,),
    "samples": (int,),
    "output": (dict,),
    "stopped_by": (str,),
    "stop_signal": (str,),
    "outlived": (list,),
    "runner": (dict,),
    "probe": (dict,),
    "recording": (dict,),
    "exception": (dict,),
    "python": (dict,),
    "hint": (str,),
    "killed_at_shutdown": (bool,),
    "redacted": (bool,),
    "trainprof_version": (str,),
}


# Inside those objects, likewise (the stack chunks are read by _stack_chunks).
_NESTED_TYPES: dict[str, dict[str, tuple[type, ...]]] = {
    "output": dict.fromkeys(
        ("stdout_bytes", "stdout_lines", "stderr_bytes", "stderr_lines"), (int,)
    ),
    "hang": {
        "stacks_file": (str,),
        "processes": (int,),
        "workers": (int,),
        "main_stack": (str,),
        "compiling": (bool,),
        "silent_s": (int, float),
        "steps_before": (int,),
        "unit": (str,),
    },
    "stacks": {"chunks": (list,), "pid": (int,), "error": (str,), "ranks": (list,)},
    "runner": {"pid": (int,), "started": (int, float), "died": (bool,)},
    "probe": {"loaded": (bool,), "reason": (str,)},
    "recording": {"stopped_at_s": (int, float), "reason": (str,), "file": (str,)},
    "exception": {"type": (str,), "message": (str,)},
}


def _typed(
    data: dict[str, Any], types: dict[str, tuple[type, ...]], drop: bool = False
) -> dict[str, Any]:
    """``data`` with every known field whose value is not of its type (or is a non-finite
    float, or an int beyond 64 bits) read as None: recorded, but unknown; with ``drop``, left
    out (inside objects, whose readers default a missing field)."""
    out = {key: _typed_value(value, types.get(key)) for key, value in data.items()}
    if drop:
        return {k: v for k, v in out.items() if v is not None or data[k] is None}
    return out


def _typed_value(value: Any, want: tuple[type, ...] | None) -> Any:
    if want is None or value is None:
        return value
    if not isinstance(value, want) or (isinstance(value, bool) and bool not in want):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, int) and not isinstance(value, bool) and _int(abs(value)) is None:
        return None
    return value


def _load_meta(path: Path) -> dict[str, Any]:
    """run.json as a dict; a file that is not one is a CorruptRunError (one line, exit 2)."""
    if not path.is_file():
        return {}
    try:
        meta = read_json(path)
    except (OSError, ValueError) as exc:  # JSONDecodeError, UnicodeDecodeError, too deep
        reason = getattr(exc, "strerror", None) or _short(exc)
        raise CorruptRunError(f"{path} cannot be read as a run record: {reason}") from None
    if not isinstance(meta, dict):
        raise CorruptRunError(
            f"{path} cannot be read as a run record: it holds a JSON {type(meta).__name__}, "
            "not an object"
        )
    command = meta.get("command")
    if "command" in meta and not (
        isinstance(command, list) and not any(isinstance(a, (list, dict)) for a in command)
    ):
        raise CorruptRunError(
            f"{path} cannot be read as a run record: its command is not a list of words"
        )
    out = _typed(meta, _META_TYPES)
    for key, types in _NESTED_TYPES.items():
        if isinstance(out.get(key), dict):
            out[key] = _typed(out[key], types, drop=True)
    for key in ("command", "forwarded"):
        if key in out:  # a list of words, whatever the file held
            out[key] = [str(a) for a in out[key]] if isinstance(out[key], list) else []
    return out


def _short(exc: Exception) -> str:
    text = str(exc) if not isinstance(exc, json.JSONDecodeError) else exc.msg
    if isinstance(exc, json.JSONDecodeError):
        text += f" at line {exc.lineno} column {exc.colno}"
    return text[:200] or type(exc).__name__


def _file_name(name: object) -> str | None:
    """A file named in run.json, only if it is a plain name inside the run directory."""
    if isinstance(name, str) and name == os.path.basename(name) and name not in ("", ".", ".."):
        return name
    return None


def _stack_chunks(stacks: object) -> list[tuple[str, float]]:
    if not isinstance(stacks, dict) or not isinstance(stacks.get("chunks"), list):
        return []
    out: list[tuple[str, float]] = []
    for chunk in stacks["chunks"]:
        if not isinstance(chunk, dict):
            continue
        name, started = _file_name(chunk.get("file")), chunk.get("started_at")
        if name is None or isinstance(started, bool) or not isinstance(started, (int, float)):
            continue
        if math.isfinite(started):
            out.append((name, float(started)))
    return out


def _load_chunks(load: Loader, chunks: list[tuple[str, float]]) -> list[StackSpan]:
    """One recorder's stack samples, its chunks in order."""
    return [span for name, started_at in chunks for span in load(name, started_at)]


def _rank_stack_chunks(stacks: object) -> dict[int, list[tuple[str, float]]]:
    """The other ranks' chunks (``stacks.ranks``: rank, pid, chunks, error), by rank."""
    ranks = stacks.get("ranks") if isinstance(stacks, dict) else None
    out: dict[int, list[tuple[str, float]]] = {}
    for entry in ranks if isinstance(ranks, list) else ():
        rank = entry.get("rank") if isinstance(entry, dict) else None
        if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0:
            out[rank] = _stack_chunks(entry)
    return out


def _tail(path: Path) -> str:
    try:
        with open_regular(path) as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - OUTPUT_TAIL_BYTES))
            # masked again: a copy an older trainprof (or a killed one) left unmasked
            return redact_text(f.read().decode("utf-8", "replace"))
    except OSError:
        return ""


@contextlib.contextmanager
def _opened(path: Path) -> Iterator[IO[str]]:
    """A run file as text, or nothing to read where it is not a regular file (said by
    ``run_files.irregular``) or cannot be opened."""
    try:
        f = open_regular(path, text=True)
    except OSError:
        yield io.StringIO()
        return
    with f:
        yield f


def is_run_dir(path: str | Path) -> bool:
    return os.path.isfile(os.path.join(path, META))
