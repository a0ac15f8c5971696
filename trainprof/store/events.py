"""Reading event files: a whole file into columns (analysis), or new lines as they land (live).

Steps are kept as integer columns (``array('q')``), not objects, so a million-step run loads
in seconds and in tens of MB.
"""

from __future__ import annotations

import json
import os
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from trainprof.store.schema import (
    BATCH,
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


def _columns(names: tuple[str, ...]) -> dict[str, array[int]]:
    return {n: array("q") for n in names}


@dataclass
class ProcessLog:
    """Everything one process of the job recorded. Times are µs since ``header['t0']``."""

    header: dict[str, Any]
    steps: dict[str, array[int]] = field(default_factory=lambda: _columns(STEP_FIELDS))
    batches: dict[str, array[int]] = field(default_factory=lambda: _columns(BATCH_FIELDS))
    loaders: dict[int, dict[str, Any]] = field(default_factory=dict)
    epochs: list[tuple[int, int, int]] = field(default_factory=list)  # key, t_iter, first_wait
    saves: list[tuple[int, int, int, str]] = field(default_factory=list)  # t, dur, bytes, path
    modes: list[tuple[int, bool]] = field(default_factory=list)
    fetch_count: int = 0  # dataset fetches (batches) so far, cumulative
    fetch_us: int = 0  # their time: __getitem__ calls + collate
    collate_us: int = 0  # the collate_fn part of fetch_us (0 in runs recorded before it was)
    pin_us: int = 0  # pin_memory calls
    torch_imported_us: int | None = None
    infos: list[dict[str, Any]] = field(default_factory=list)
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

    def add_line(self, line: str) -> None:
        kind, _, rest = line.partition(" ")
        try:
            if kind == STEP:
                vals = rest.split()
                for name, v in zip(STEP_FIELDS, vals, strict=True):
                    self.steps[name].append(int(v))
            elif kind == BATCH:
                vals = rest.split()
                for name, v in zip(BATCH_FIELDS, vals, strict=True):
                    self.batches[name].append(int(v))
            elif kind == LOADER:
                key, _, cfg = rest.partition(" ")
                self.loaders[int(key)] = json.loads(cfg)
            elif kind == EPOCH:
                k, t, w = rest.split()
                self.epochs.append((int(k), int(t), int(w)))
            elif kind == SAVE:
                t, d, b, path = rest.split(" ", 3)
                self.saves.append((int(t), int(d), int(b), json.loads(path)))
            elif kind == MODE:
                t, m = rest.split()
                self.modes.append((int(t), m == "1"))
            elif kind == FETCH:
                _t, c, us, *parts = rest.split()
                self.fetch_count, self.fetch_us = int(c), int(us)
                if len(parts) == 2:
                    self.collate_us, self.pin_us = int(parts[0]), int(parts[1])
            elif kind == TORCH:
                self.torch_imported_us = int(rest)
            elif kind == INFO:
                self.infos.append(json.loads(rest))
            else:
                self.bad_lines += 1
        except (ValueError, json.JSONDecodeError):
            self.bad_lines += 1  # a torn last line of a killed process, say


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
    except json.JSONDecodeError:
        return None
    if not isinstance(header, dict) or header.get("version") != SCHEMA_VERSION:
        return None
    return header


def load_process(path: str) -> ProcessLog | None:
    """Load one event file; None if it is not a trainprof event file of this version."""
    with open(path, encoding="utf-8", errors="replace") as f:
        header = parse_header(f.readline())
        if header is None:
            return None
        log = ProcessLog(header)
        for line in f:
            if line.endswith("\n"):
                log.add_line(line[:-1])
    return log


def load_processes(run_dir: str) -> list[ProcessLog]:
    logs = (load_process(p) for p in event_files(run_dir))
    return [log for log in logs if log is not None]


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
            yield header, line
