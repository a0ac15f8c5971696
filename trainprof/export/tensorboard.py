"""Write a run's step series and findings as TensorBoard event files, with TensorBoard's writer.

The scalars are indexed by optimizer step: each stepping process's step time, data wait and
throughput, and the host's CPU, memory and GPU samples at the step the job had reached. The
findings and a one-paragraph summary are text (TensorBoard's Text tab). A long run is drawn in
at most ``MAX_POINTS`` points a series, each the mean of a block of consecutive values.
"""

from __future__ import annotations

import bisect
import math
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from trainprof.export.extras import need
from trainprof.store.events import ProcessLog
from trainprof.store.session import Session

MAX_POINTS = 5_000
OPTION = "--tensorboard"
TAG = "trainprof"


def check(out_dir: Path) -> None:
    """Before the job: TensorBoard installed and ``out_dir`` a folder that can be written (made
    where missing); else the one-line TrainprofError."""
    need("tensorboard.summary.writer.event_file_writer", "tensorboard", OPTION)
    from trainprof.errors import TrainprofError

    path = out_dir.absolute()
    try:
        while not path.exists():
            path = path.parent
        ok = path.is_dir() and os.access(path, os.W_OK | os.X_OK)
    except OSError as exc:  # a directory on the way denies search
        raise TrainprofError(f"cannot write {OPTION} {out_dir}: {exc.strerror or exc}") from None
    if not path.is_dir():
        raise TrainprofError(f"{OPTION} {out_dir}: {path} is a file; give a folder")
    if not ok:
        raise TrainprofError(f"cannot write {OPTION} {out_dir}: {path} is not writable")


def write(session: Session, report: dict[str, Any], out_dir: Path) -> list[Path]:
    """Event files under ``out_dir`` (one folder per rank of a many-rank job); their paths."""
    writer_mod = need("tensorboard.summary.writer.event_file_writer", "tensorboard", OPTION)
    steppers = [p for p in session.processes if p.role != "worker" and p.n_steps]
    wall = _WallClock(session.meta)
    written: list[Path] = []
    folders: list[tuple[Path, ProcessLog | None]] = (
        [(out_dir / _rank_name(log), log) for log in steppers]
        if len(steppers) > 1
        else [(out_dir, steppers[0] if steppers else None)]
    )
    for i, (folder, log) in enumerate(folders):
        folder.mkdir(parents=True, exist_ok=True)
        writer = writer_mod.EventFileWriter(str(folder), filename_suffix=".trainprof")
        try:
            events = _Events(wall)
            if log is not None:
                events.steps(log)
            if i == 0:  # the host's series and the report once, beside the first stepper's
                events.host(session)
                events.text(f"{TAG}/summary", _summary(report))
                events.text(f"{TAG}/findings", _findings(report))
            for event in events.out:
                writer.add_event(event)
        finally:
            writer.close()
        written.extend(sorted(folder.glob("events.out.tfevents.*.trainprof")))
    return written


class _WallClock:
    """Wall time of a monotonic reading, from run.json's launch on both clocks."""

    def __init__(self, meta: dict[str, Any]) -> None:
        start, launch = meta.get("wall_start"), meta.get("t_launch")
        ok = isinstance(start, (int, float)) and isinstance(launch, (int, float))
        self.offset = float(start) - float(launch) if ok else None  # type: ignore[arg-type]

    def at(self, monotonic: float) -> float:
        return monotonic + self.offset if self.offset is not None else 0.0


class _Events:
    """The events of one folder, built with TensorBoard's own protocol buffers."""

    def __init__(self, wall: _WallClock) -> None:
        from tensorboard.compat.proto import event_pb2, summary_pb2

        self.event_pb2, self.summary_pb2 = event_pb2, summary_pb2
        self.wall = wall
        self.out: list[Any] = []
        self.step_ends: list[float] = []  # monotonic end of each step of the first stepper

    def scalar(self, tag: str, points: Iterable[tuple[int, float, float]]) -> None:
        """(step, monotonic time, value) points; NaN values left out."""
        for step, t, value in points:
            if math.isnan(value):
                continue
            summary = self.summary_pb2.Summary(
                value=[self.summary_pb2.Summary.Value(tag=tag, simple_value=value)]
            )
            self.out.append(
                self.event_pb2.Event(wall_time=self.wall.at(t), step=step, summary=summary)
            )

    def text(self, tag: str, markdown: str) -> None:
        from tensorboard.compat.proto import tensor_pb2, tensor_shape_pb2
        from tensorboard.plugins.text import plugin_data_pb2

        s = self.summary_pb2
        meta = s.SummaryMetadata(
            plugin_data=s.SummaryMetadata.PluginData(
                plugin_name="text",
                content=plugin_data_pb2.TextPluginData(version=0).SerializeToString(),
            )
        )
        tensor = tensor_pb2.TensorProto(
            dtype="DT_STRING",
            string_val=[markdown.encode("utf-8")],
            tensor_shape=tensor_shape_pb2.TensorShapeProto(
                dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=1)]
            ),
        )
        value = s.Summary.Value(tag=tag, metadata=meta, tensor=tensor)
        last = self.step_ends[-1] if self.step_ends else 0.0
        self.out.append(
            self.event_pb2.Event(
                wall_time=self.wall.at(last),
                step=max(len(self.step_ends) - 1, 0),
                summary=s.Summary(value=[value]),
            )
        )

    def steps(self, log: ProcessLog) -> None:
        cols = log.steps
        ends = [log.t0 + t / 1e6 for t in cols["t"]]
        if not self.step_ends:
            self.step_ends = ends
        durs = [d / 1e3 for d in cols["dur"]]  # ms
        waits = [w / 1e3 for w in cols["wait"]]
        rates = [1e3 / d if d > 0 else math.nan for d in durs]
        samples = [
            n * 1e3 / d if n > 0 and d > 0 else math.nan
            for n, d in zip(cols["samples"], durs, strict=True)
        ]
        for name, values in (
            ("step_time_ms", durs),
            ("data_wait_ms", waits),
            ("steps_per_s", rates),
            ("samples_per_s", samples),
        ):
            self.scalar(f"{TAG}/{name}", _blocks(range(len(ends)), ends, values))

    def host(self, session: Session) -> None:
        s = session.samples
        ts = list(s.t)
        at = [self._step_at(t) for t in ts]
        self.scalar(f"{TAG}/cpu_percent", _blocks(at, ts, list(s.tree_cpu)))
        self.scalar(f"{TAG}/memory_mib", _blocks(at, ts, [r / 2**20 for r in s.tree_rss]))
        for index, (gts, utils) in sorted(s.gpu_by_index.items()):
            g_at = [self._step_at(t) for t in gts]
            self.scalar(f"{TAG}/gpu{index}/util_percent", _blocks(g_at, list(gts), list(utils)))
        for index, (mts, used) in sorted(s.gpu_mem_by_index.items()):
            m_at = [self._step_at(t) for t in mts]
            mib = [u / 2**20 for u in used]
            self.scalar(f"{TAG}/gpu{index}/memory_mib", _blocks(m_at, list(mts), mib))

    def _step_at(self, t: float) -> int:
        """The steps the job had ended by monotonic time ``t``: the x of a host sample."""
        return bisect.bisect_right(self.step_ends, t)


def _blocks(
    steps: Sequence[int], ts: Sequence[float], values: Sequence[float]
) -> list[tuple[int, float, float]]:
    """At most MAX_POINTS points: the mean of each block of consecutive values, at its last."""
    n = len(values)
    size = max(1, math.ceil(n / MAX_POINTS))
    out: list[tuple[int, float, float]] = []
    for i in range(0, n, size):
        block = [v for v in values[i : i + size] if not math.isnan(v)]
        j = min(i + size, n) - 1
        out.append((int(steps[j]), float(ts[j]), sum(block) / len(block) if block else math.nan))
    return out


def _rank_name(log: ProcessLog) -> str:
    rank = log.header.get("rank")
    return f"rank{rank}" if rank is not None else f"pid{log.pid}"


def _summary(report: dict[str, Any]) -> str:
    s = report.get("summary") or {}
    parts = []
    for key, label in (("steps_per_s", "it/s"), ("samples_per_s", "samples/s")):
        value = s.get(key)
        if isinstance(value, (int, float)):
            parts.append(f"{value:.2f} {label}")
    wait = s.get("data_wait_frac")
    if isinstance(wait, (int, float)):
        parts.append(f"data wait {wait:.0%} of step time")
    verdict = (s.get("bottleneck") or {}).get("verdict")
    if verdict:
        parts.append(f"bottleneck: {verdict}")
    return "trainprof: " + (" · ".join(parts) if parts else "no steady state measured")


def _findings(report: dict[str, Any]) -> str:
    findings = report.get("findings") or []
    if not findings:
        return "trainprof found no problem in this run."
    lines = []
    for i, f in enumerate(findings, 1):
        impact = f.get("impact")
        share = f" ({impact:.0%} of time)" if isinstance(impact, (int, float)) else ""
        lines.append(f"**{i}. {f.get('id')}** ({f.get('severity')}){share}: {f.get('title')}")
        if f.get("where"):
            lines.append(f"  - where: `{f['where']}`")
        lines.extend(f"  - {e}" for e in (f.get("evidence") or [])[:3])
        lines.extend(f"  - fix: {x}" for x in (f.get("fix") or [])[:2])
        lines.append("")
    return "\n".join(lines)


def export(session: Session, report: dict[str, Any], out_dir: Path) -> str:
    """Write the event files and return the line that tells the user where they are."""
    from trainprof.errors import TrainprofError

    try:
        write(session, report, out_dir)
    except OSError as exc:
        return f"trainprof: could not write {OPTION} {out_dir}: {exc.strerror or exc}"
    except TrainprofError as exc:
        return f"trainprof: {exc}"
    return f"TensorBoard: event files in {out_dir} (view: tensorboard --logdir {out_dir})"


def printing_export(out_dir: Path) -> Callable[[Session, dict[str, Any]], None]:
    """The runner's ``on_report``: export, then say where on stderr (the job's output is done)."""

    def on_report(session: Session, report: dict[str, Any]) -> None:
        print(export(session, report, out_dir), file=sys.stderr)

    return on_report
