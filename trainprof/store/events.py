"""Reading event files: a whole file into columns (analysis), or new lines as they land (live).

Steps are kept as integer columns, not objects, so a million-step run loads in about a second
and in tens of MB: the time column as ``array('q')`` (µs since start: a day is beyond 32 bits), the
others (durations, waits, batch size, fetches, samples) as ``array('i')``, 4 bytes a step,
widened to ``'q'`` should a value not fit (a step of more than 35 minutes).
"""

from __future__ import annotations

import json
import math
import os
import re
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from trainprof.store.run_files import open_regular
from trainprof.store.schema import (
    BACKWARD,
    BATCH,
    DEVICE,
    EPOCH,
    EVENT_FILE_PREFIX,
    EVENT_FILE_SUFFIX,
    FETCH,
    INFO,
    LOADER,
    MAGIC,
    MODE,
    SAVE,
    SCHEMA_VERSION,
    STEP,
    TORCH,
)

STEP_FIELDS = ("t", "dur", "wait", "sampler", "batch_size", "fetches", "samples")
BATCH_FIELDS = ("t", "wait", "sampler", "batch_size")
DEVICE_FIELDS = (
    "t", "step", "dev_fwd", "dev_bwd", "dev_opt", "dev_gap",
    "host_fwd", "host_bwd", "host_opt", "host_gap", "allocated", "reserved", "peak",
    "dev_data", "host_data",  # later micro-batches' fetches (a run before them: -1)
)  # fmt: skip
_DEVICE_FIELDS_BEFORE_DATA = 13
WIDE_FIELDS = frozenset({"t"})  # 8 bytes a step: array('q'); the rest start at 4 bytes
_Q_MIN, _Q_MAX = -(1 << 63), (1 << 63) - 1
READ_HINT = 1 << 18  # bytes of lines parsed at a time (a few MB of transient objects)


def _columns(names: tuple[str, ...]) -> dict[str, array[int]]:
    return {n: array("q" if n in WIDE_FIELDS else "i") for n in names}


def _extend(cols: dict[str, array[int]], name: str, values: list[int]) -> None:
    """Append values to a column, widening an ``'i'`` column to ``'q'`` if one does not fit
    (``fromlist`` leaves the array as it was when a value fails)."""
    try:
        cols[name].fromlist(values)
    except OverflowError:
        if cols[name].typecode == "q":
            raise
        cols[name] = array("q", cols[name])
        cols[name].fromlist(values)


@dataclass
class ProcessLog:
    """Everything one process of the job recorded. Times are µs since ``header['t0']``."""

    header: dict[str, Any]
    steps: dict[str, array[int]] = field(default_factory=lambda: _columns(STEP_FIELDS))
    batches: dict[str, array[int]] = field(default_factory=lambda: _columns(BATCH_FIELDS))
    # backward() returns (µs), recorded only while the job has made neither an optimizer step
    # nor a DataLoader batch: the steps of a hand-written loop (a manual parameter update).
    backwards: array[int] = field(default_factory=lambda: array("q"))
    loaders: dict[int, dict[str, Any]] = field(default_factory=dict)
    epochs: list[tuple[int, int, int]] = field(default_factory=list)  # key, t_iter, first_wait
    saves: list[tuple[int, int, int, str]] = field(default_factory=list)  # t, dur, bytes, path
    modes: list[tuple[int, bool]] = field(default_factory=list)
    fetch_count: int = 0  # dataset fetches (batches) so far, cumulative
    fetch_us: int = 0  # their time: __getitem__ calls + collate
    fetch_t_us: int = 0  # when those counters were last written (µs from t0)
    collate_us: int = 0  # the collate_fn part of fetch_us (0 in runs recorded before it was)
    pin_us: int = 0  # pin_memory calls
    torch_imported_us: int | None = None
    infos: list[dict[str, Any]] = field(default_factory=list)
    # Timed steps on the GPU's clock (one in probe.device.EVERY): DEVICE_FIELDS each.
    device: list[tuple[int, ...]] = field(default_factory=list)
    bad_lines: int = 0

    @property
    def pid(self) -> int:
        return int(self.header.get("pid", -1))

    @property
    def role(self) -> str:
        return str(self.header.get("role", "main"))

    @property
    def t0(self) -> float:
        return float(self.header.get("t0", 0.0))

    @property
    def n_steps(self) -> int:
        return len(self.steps["t"])

    @property
    def reached_exit(self) -> bool:
        """Its exit handlers ran (the probe's is the last): its Python program had ended."""
        return any(i.get("at_exit") is True for i in self.infos)

    def add_line(self, line: str) -> None:
        kind, _, rest = line.partition(" ")
        try:
            if kind == STEP:
                self._add_row(self.steps, STEP_FIELDS, rest)
            elif kind == BATCH:
                self._add_row(self.batches, BATCH_FIELDS, rest)
            elif kind == BACKWARD:
                at = int(rest)
                if not _Q_MIN <= at <= _Q_MAX:
                    raise ValueError("time out of range")
                self.backwards.append(at)
            elif kind == LOADER:
                key, _, cfg = rest.partition(" ")
                self.loaders[int(key)] = checked(_json_object(cfg), LOADER_FIELDS)
            elif kind == EPOCH:
                k, t, w = rest.split()
                self.epochs.append((int(k), int(t), int(w)))
            elif kind == SAVE:
                t, d, b, path = rest.split(" ", 3)
                self.saves.append((int(t), int(d), int(b), str(json.loads(path))))
            elif kind == MODE:
                t, m = rest.split()
                self.modes.append((int(t), m == "1"))
            elif kind == FETCH:
                t, c, us, *parts = rest.split()
                self.fetch_count, self.fetch_us, self.fetch_t_us = int(c), int(us), int(t)
                if len(parts) == 2:
                    self.collate_us, self.pin_us = int(parts[0]), int(parts[1])
            elif kind == TORCH:
                self.torch_imported_us = int(rest)
            elif kind == INFO:
                info = checked(_json_object(rest), INFO_FIELDS)
                self.infos.append(info)
                adopt_rank(self.header, info)
            elif kind == DEVICE:
                vals = tuple(int(v) for v in rest.split())
                if len(vals) == _DEVICE_FIELDS_BEFORE_DATA:
                    vals += (-1, -1)
                if len(vals) != len(DEVICE_FIELDS):
                    raise ValueError("short device record")
                self.device.append(vals)
            else:
                self.bad_lines += 1
        except (ValueError, RecursionError):  # RecursionError: JSON nested too deeply
            self.bad_lines += 1  # a torn last line of a killed process, say

    def add_lines(self, lines: list[str]) -> None:
        """Add complete lines (each ending in a newline), in order: the same as ``add_line``
        on each, but steps and batches are parsed a block at a time. (Steps and batches only
        fill their own columns, so reading them apart from the other records keeps order.)"""
        steps = [ln for ln in lines if ln[:2] == "S "]
        if steps:
            self._add_rows(self.steps, STEP_FIELDS, steps)
        if len(steps) == len(lines):
            return
        others = [ln for ln in lines if ln[:2] != "S "] if steps else lines
        batches = [ln for ln in others if ln[:2] == "B "]
        if batches:
            self._add_rows(self.batches, BATCH_FIELDS, batches)
        if len(batches) < len(others):
            for ln in others:
                if ln[:2] != "B ":
                    self.add_line(ln[:-1])

    def _add_row(self, cols: dict[str, array[int]], names: tuple[str, ...], rest: str) -> None:
        """One record's fields, all or none: a missing or bad field leaves the columns alone
        (ValueError). Fields past the last are not read, but the line counts as bad."""
        fields = rest.split()
        vals = [int(v) for v in fields[: len(names)]]
        if len(vals) < len(names) or not all(_Q_MIN <= v <= _Q_MAX for v in vals):
            raise ValueError(rest)
        for name, v in zip(names, vals, strict=True):
            _extend(cols, name, [v])
        if len(fields) > len(names):
            raise ValueError(rest)

    def _add_rows(
        self, cols: dict[str, array[int]], names: tuple[str, ...], lines: list[str]
    ) -> None:
        """Records of one kind (whole lines, "S 1 2 …\\n"): a block at C speed when every
        line is plain, else line by line."""
        width = len(names)
        flat = _plain_block(lines, width)
        if flat is not None:
            n0 = len(cols[names[0]])
            try:
                for k, name in enumerate(names):
                    _extend(cols, name, flat[k::width])
                return
            except OverflowError:  # beyond 64 bits: undo, and judge the lines one by one
                for name in names:
                    del cols[name][n0:]
        for ln in lines:
            try:
                self._add_row(cols, names, ln[2:])
            except ValueError:
                self.bad_lines += 1


_DIGITS = b"0123456789-"


def _plain_block(lines: list[str], width: int) -> list[int] | None:
    """The fields of lines of one kind, "K a b …\\n", in a flat list, when every line holds
    exactly ``width`` decimal integers, one space apart (what the writer writes); else None.

    Checked at C speed: without its digits and minus signs the block must read "K" and
    ``width`` spaces and a newline per line, and its fields, commas between, must parse as a
    JSON list (which takes -?(0|[1-9][0-9]*), integers that int() reads the same way)."""
    text = "".join(lines)
    try:
        raw = text.encode("ascii")
    except UnicodeEncodeError:
        return None
    kind = lines[0][:2]
    if raw.translate(None, _DIGITS) != (kind[0] + " " * width + "\n").encode() * len(lines):
        return None
    try:
        flat = json.loads("[" + text[2:-1].replace("\n" + kind, ",").replace(" ", ",") + "]")
    except (ValueError, RecursionError):  # a field like "-", "1-2" or "007": int() judges
        return None
    return flat if len(flat) == width * len(lines) else None


def event_files(run_dir: str) -> list[str]:
    try:
        names = os.listdir(run_dir)
    except OSError:
        return []
    return sorted(
        os.path.join(run_dir, n)
        for n in names
        if n.startswith(EVENT_FILE_PREFIX) and n.endswith(EVENT_FILE_SUFFIX)
    )


def parse_header(line: str) -> dict[str, Any] | None:
    if not line.startswith(MAGIC):
        return None
    try:
        header = json.loads(line[len(MAGIC) :])
    except (ValueError, RecursionError):
        return None
    if not isinstance(header, dict) or header.get("version") != SCHEMA_VERSION:
        return None
    # The fields every reader takes as numbers or names; a file whose header has them of
    # another type (damaged, or not the probe's) is not read at all.
    pid, t0, role = header.get("pid", -1), header.get("t0", 0.0), header.get("role", "main")
    if not _is_int(pid) or not isinstance(role, str):
        return None
    if isinstance(t0, bool) or not isinstance(t0, (int, float)) or not math.isfinite(t0):
        return None
    if any(not (header.get(k) is None or _is_int(header[k])) for k in _RANK_FIELDS):
        return None
    return header


_RANK_FIELDS = ("rank", "local_rank", "world_size", "worker_id")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -(1 << 63) <= v < 1 << 63


# What the probe writes in a loader (L) and an info (X) record, field by field. A damaged file
# can hold anything there; a field that fails its check is dropped, as if never recorded, so
# the analysis only ever sees the types (and sane sizes) the probe writes.
Check = Callable[[Any], bool]


def _int_in(lo: int, hi: int) -> Check:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and lo <= v < hi


def _is(*types: type) -> Check:
    return lambda v: isinstance(v, types) and (bool in types or not isinstance(v, bool))


_COUNT = _int_in(0, 1 << 31)  # num_workers, batch_size, len, ...: never beyond 32 bits
_STR, _BOOL = _is(str), _is(bool)


def _code_at(v: Any) -> bool:
    """[file, line, qualname]."""
    return isinstance(v, list) and len(v) == 3 and _STR(v[0]) and _COUNT(v[1]) and _STR(v[2])


def _str_to_count(v: Any) -> bool:
    return isinstance(v, dict) and all(_STR(k) and _COUNT(n) for k, n in v.items())


LOADER_FIELDS: dict[str, Check] = {
    "batch_size": _COUNT,
    "num_workers": _COUNT,
    "pin_memory": _BOOL,
    "persistent_workers": _BOOL,
    "prefetch_factor": _COUNT,
    "drop_last": _BOOL,
    "sampler": _STR,
    "batch_sampler": _STR,
    "collate_fn": _STR,
    "worker_init_fn": _STR,
    "dataset": _STR,
    "iterable": _BOOL,
    "getitem_at": _code_at,
    "collate_at": _code_at,
    "len": _COUNT,
    "sharing_strategy": _STR,
    "start_method": _STR,
}
PRECISION_FIELDS: dict[str, Any] = {
    "device": _STR,
    "dtype": _STR,
    "matmul_precision": _STR,
    "cuda_matmul_tf32": _BOOL,
    "cudnn_tf32": _BOOL,
    "capability": lambda v: isinstance(v, list) and len(v) == 2 and all(map(_COUNT, v)),
    "gpu_name": _STR,
    "memory_total": _int_in(0, 1 << 62),
    "gpu_uuid": _STR,
    "torch": _STR,
    "cuda_build": _STR,
    "cuda_visible_devices": _STR,
}
FLOPS_FIELDS: dict[str, Check] = {
    "step": _COUNT,
    "steps": _COUNT,
    "per_step": _int_in(0, 1 << 62),
    "failed_ops": _COUNT,
    "skipped": _STR,
}
INFO_FIELDS: dict[str, Any] = {  # a dict value: the fields of an object inside
    "t": _int_in(-(1 << 63), 1 << 63),
    "precision": PRECISION_FIELDS,
    "flops": FLOPS_FIELDS,
    "autocast": _STR,
    "dtype": _STR,
    "optimizers": {"counted": _STR, "steps": _str_to_count},
    "stop": _STR,
    "steps": _COUNT,
    "exception": _STR,
    "message": _STR,
    "at_exit": _BOOL,
    "probe_error": _STR,
    "device_timeline_error": _STR,
    "asked_worker_info": _BOOL,  # a DataLoader worker called get_worker_info()
    "first_batch": _int_in(0, 1 << 32),  # checksum of a worker's first IterableDataset batch
    "rank": _COUNT,  # from init_process_group, in a process no launcher gave a RANK
    "world_size": _COUNT,
    "step_callers": lambda v: (
        isinstance(v, list)
        and all(isinstance(f, list) and len(f) == 2 and all(map(_STR, f)) for f in v)
    ),
}


def adopt_rank(header: dict[str, Any], info: dict[str, Any]) -> None:
    """A process that learned its rank at ``init_process_group`` (no ``RANK`` in its
    environment: ``torch.multiprocessing.spawn``) is a rank from then on, as if a launcher had
    said so in its header; a rank the header already has is kept."""
    rank = info.get("rank")
    if not isinstance(rank, int) or header.get("rank") is not None:
        return
    header["rank"] = rank
    header["world_size"] = info.get("world_size")
    if header.get("role", "main") in ("main", "fork"):
        header["role"] = "rank"


def checked(obj: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    """``obj`` without the known fields whose value fails its check (None always passes); a
    field whose check is a dict must be an object, checked field by field in turn."""
    out: dict[str, Any] = {}
    for key, value in obj.items():
        rule = fields.get(key)
        if value is None or rule is None:
            out[key] = value
        elif isinstance(rule, dict):
            if isinstance(value, dict):
                out[key] = checked(value, rule)
        elif rule(value):
            out[key] = value
    return out


def _json_object(text: str) -> dict[str, Any]:
    """A record's JSON payload, which is always an object (ValueError if not: a bad line)."""
    obj = json.loads(text)
    if not isinstance(obj, dict):
        raise ValueError(f"not a JSON object: {text[:40]}")
    return obj


def load_process(path: str) -> ProcessLog | None:
    """Load one event file; None if it is not a trainprof event file of this version, or not
    a regular file (``run_files``: a symlink to /dev/zero would be read for ever)."""
    try:
        f = open_regular(path, text=True)
    except OSError:
        return None
    with f:
        header = parse_header(f.readline())
        if header is None:
            return None
        log = ProcessLog(header)
        while lines := f.readlines(READ_HINT):
            if not lines[-1].endswith("\n"):
                lines.pop()  # the end of the file, torn
            log.add_lines(lines)
    return log


def load_processes(run_dir: str) -> list[ProcessLog]:
    return read_processes(run_dir)[0]


def read_processes(run_dir: str) -> tuple[list[ProcessLog], list[str]]:
    """The run's event files this trainprof reads, and a sentence on those of another version
    (not read: their steps would otherwise be silently missing)."""
    logs: list[ProcessLog] = []
    others: dict[str, list[str]] = {}
    for path in event_files(run_dir):
        log = load_process(path)
        if log is not None:
            logs.append(log)
        elif (version := other_version(path)) is not None:
            others.setdefault(version, []).append(os.path.basename(path))
    notes = []
    for version, names in others.items():
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        notes.append(
            f"{shown}: {'an event file' if len(names) == 1 else 'event files'} of version "
            f"{version}, which this trainprof cannot read (it reads version {SCHEMA_VERSION}): "
            "their steps and records are not in this report; report the run with the trainprof "
            "that recorded it"
        )
    return logs, notes


_ANY_MAGIC = re.compile(r"#TP(\d+) ")
_VERSION = re.compile(r'"version": ?(\d{1,9})')


def other_version(path: str) -> str | None:
    """The version of a trainprof event file of another version than this one reads (None:
    it is of this version, or no trainprof event file)."""
    try:
        with open_regular(path) as f:
            line = f.readline(1 << 20).decode("utf-8", "replace")
    except OSError:
        return None
    m = _ANY_MAGIC.match(line)
    if m is None:
        return None
    try:
        header = json.loads(line[m.end() :])
        version = header.get("version") if isinstance(header, dict) else None
    except (ValueError, RecursionError):  # torn or cut: the field, where it is written
        found = _VERSION.search(line)
        version = int(found.group(1)) if found else None
    if version is None and m.group(1) != str(SCHEMA_VERSION):
        version = m.group(1)  # the magic's own number, where the header has none
    if version is None or version == SCHEMA_VERSION:
        return None
    return str(version)[:20]


class EventTail:
    """Yields complete new lines of every event file in a run directory, as they are written."""

    def __init__(self, run_dir: str) -> None:
        self.run_dir = run_dir
        self._offsets: dict[str, int] = {}
        self._partial: dict[str, bytes] = {}
        self.headers: dict[str, dict[str, Any]] = {}

    def poll(self) -> Iterator[tuple[dict[str, Any], str]]:
        for path in event_files(self.run_dir):
            yield from self._read_new(path)

    def _read_new(self, path: str) -> Iterator[tuple[dict[str, Any], str]]:
        offset = self._offsets.get(path, 0)
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read()
        except OSError:
            return
        if not data:
            return
        self._offsets[path] = offset + len(data)
        data = self._partial.pop(path, b"") + data
        lines = data.split(b"\n")
        if lines[-1]:
            self._partial[path] = lines[-1]
        for raw in lines[:-1]:
            line = raw.decode("utf-8", "replace")
            header = self.headers.get(path)
            if header is None:
                parsed = parse_header(line)
                if parsed is not None:
                    self.headers[path] = parsed
                continue
            if line.startswith(f"{INFO} ") and '"rank"' in line:
                try:
                    adopt_rank(header, checked(_json_object(line[2:]), INFO_FIELDS))
                except ValueError:
                    pass
            yield header, line
