"""Whether the run directory still takes what trainprof writes, and what happens once a write
fails (a full disk): recording stops, the job runs on."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainprof.collect.samplers import progress as progress_page
from trainprof.store import rundir
from trainprof.store.schema import (
    PROBE_STOPPED,
    event_file_name,
)

if TYPE_CHECKING:  # a Recording is made before the job starts: it imports only what that needs
    from trainprof.collect.launcher import Job
    from trainprof.collect.live import LiveView
    from trainprof.collect.samplers.loop import SamplerLoop


class Recording:
    """Whether the run directory still takes what trainprof writes. The first write that fails
    (a full disk: the output copy, samples, run.json) stops recording; the job runs on exactly as
    without trainprof and its output still flows. trainprof says so in one line, and the report
    covers what was recorded, flagged in ``meta["recording"]``: ``{"stopped_at_s": seconds
    since the job's launch, "reason": the error, "file": the file that failed first}``. The
    probe inside the job stops on its own at its first failed write (``EventWriter.stopped``)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.started_at = time.monotonic()  # the job's launch, once it is known
        self.stopped: dict[str, Any] | None = None
        self._when: float | None = None
        self._announced = False
        self.probe_stopped = False  # a probe of the job said its recording stopped
        rundir.reserve_space(run_dir)  # given back for run.json and report.json at a full disk
        progress_page.create(run_dir)  # where the probes count the steps they cannot record

    def blinds_the_watch(self) -> bool:
        """Whether the probes' event files stopped too: a probe said it stopped, or the disk
        is full (the runner's own write failed for space), so theirs fail as well."""
        full = {os.strerror(e) for e in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)}
        return self.probe_stopped or (self.stopped is not None and self.stopped["reason"] in full)

    @property
    def when(self) -> float | None:
        """When recording stopped (monotonic), or None while it goes on."""
        return self._when

    def after_stop(
        self, counted: progress_page.Unrecorded, stood_down: dict[str, Any] | None
    ) -> None:
        """What the job made once recording stopped, and whether the hang watch stood down: in
        ``meta["recording"]`` as ``unrecorded`` ({"steps", "batches", "backward_passes"}) and
        ``hang_watch_stood_down_at_s``."""
        if self.stopped is None:
            return
        if counted.pids:
            self.stopped["unrecorded"] = {
                "steps": counted.steps,
                "batches": counted.batches,
                "backward_passes": counted.backwards,
            }
        if stood_down is not None:
            self.stopped["hang_watch_stood_down_at_s"] = stood_down["at_s"]

    def failed(self, when: float, reason: str, name: str) -> None:
        if self._when is None or when < self._when:
            self._when = when
            self.stopped = {
                "stopped_at_s": round(max(0.0, when - self.started_at), 2),
                "reason": reason,
                "file": name,
            }

    def check(self, job: Job, sampler: SamplerLoop, live: LiveView | None) -> None:
        """Collect what the writers ran into; say once that recording stopped."""
        errors = [(p.log_error, p.log_path.name) for p in job.pumps]
        errors.append((sampler.write_error, rundir.SAMPLES))
        if not self.probe_stopped:  # (looked for until one is found)
            probe = self._probe_errors()
            self.probe_stopped = bool(probe)
            errors += probe
        for error, name in errors:
            if error is not None:
                self.failed(error[0], error[1], name)
        self.announce(live)

    def _probe_errors(self) -> list[tuple[tuple[float, str] | None, str]]:
        """Processes of the job whose probe stopped recording (``EventWriter._failed``)."""
        out: list[tuple[tuple[float, str] | None, str]] = []
        for path in self.run_dir.glob(f"{PROBE_STOPPED}*"):
            pid, _, err = path.name[len(PROBE_STOPPED) :].partition("-")
            try:
                ago = time.time() - path.stat().st_mtime
                reason = os.strerror(int(err)) if int(err) else "the probe's writer failed"
                out.append(((time.monotonic() - max(ago, 0.0), reason), event_file_name(int(pid))))
            except (OSError, ValueError):
                continue
        return out

    def announce(self, live: LiveView | None) -> None:
        s = self.stopped
        if s is None or self._announced:
            return
        self._announced = True
        from trainprof.collect.say import say

        say(
            live,
            f"trainprof: recording stopped {s['stopped_at_s']:.1f} s into the run: "
            f"{s['reason']} (writing {self.run_dir / s['file']}); the job goes on and its output "
            "still flows; the report covers what was recorded until then",
        )

    def write(self, name: str, data: Any) -> bool:
        """Write a JSON file of the run; the space held back is given back only once the job
        has ended (``save_meta``), so it is still there for run.json and report.json."""
        path = self.run_dir / name
        try:
            rundir.write_json(path, data)
            return True
        except OSError as exc:
            self.failed(time.monotonic(), exc.strerror or str(exc), name)
            return False

    def save_meta(self, meta: dict[str, Any]) -> None:
        """After the job: run.json, with the recording flag, using the space held back if need be."""
        if self.stopped is not None:
            meta["recording"] = self.stopped
        from trainprof.report import write_run_json

        error = write_run_json(self.run_dir / rundir.META, meta)
        if error is not None:
            self.failed(time.monotonic(), error, rundir.META)
            meta["recording"] = self.stopped
        self.announce(None)
