"""The progress page: what a probe counts once its recording stopped, as the runner reads it;
and a process stopped by a signal, as /proc tells it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from trainprof.collect.samplers import progress
from trainprof.collect.samplers.suspended import Suspensions, is_stopped
from trainprof.probe.progress import stopped_sinks
from trainprof.store.schema import BACKWARD, BATCH, INFO


def test_counts_reach_the_runner_through_the_page(tmp_path: Path) -> None:
    assert progress.create(tmp_path)
    page = progress.ProgressPage(tmp_path)
    assert page.read() == progress.NOTHING
    queue, steps = stopped_sinks(str(tmp_path))
    assert queue is steps and len(queue) == 0
    now = time.monotonic()
    for i in range(3):
        steps.append((now - 3 + i, now - 4, 0.0, 0.0, 8, 1, 8))
    queue.append(f"{BATCH} 1 2 3 4\n")
    queue.append(f"{BACKWARD} 5\n")
    queue.append(f'{INFO} {{"x": 1}}\n')  # no progress: not counted
    got = page.read()
    assert (got.steps, got.batches, got.backwards, got.pids) == (3, 1, 1, (os.getpid(),))
    assert got.last_t is not None and got.last_t >= now  # the backward pass, the latest


def test_a_child_process_counts_in_a_slot_of_its_own(tmp_path: Path) -> None:
    progress.create(tmp_path)
    _, steps = stopped_sinks(str(tmp_path))
    steps.append((time.monotonic(), 0.0, 0.0, 0.0, 1, 1, 1))
    code = (
        "import sys, time\n"
        "from trainprof.probe.progress import stopped_sinks\n"
        "_, s = stopped_sinks(sys.argv[1])\n"
        "for _ in range(5): s.append((time.monotonic(), 0.0, 0.0, 0.0, 1, 1, 1))\n"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True)
    got = progress.ProgressPage(tmp_path).read()
    assert got.steps == 6 and len(got.pids) == 2


def test_without_a_page_the_records_are_dropped(tmp_path: Path) -> None:
    queue, steps = stopped_sinks(str(tmp_path))  # the runner never made one
    steps.append((time.monotonic(), 0.0, 0.0, 0.0, 1, 1, 1))
    assert len(steps) == 0 and len(queue) == 0
    assert progress.ProgressPage(tmp_path).read() == progress.NOTHING


def test_a_stopped_process_is_seen_and_timed() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        spans = Suspensions(time.monotonic())
        assert not is_stopped(proc.pid) and spans.update([proc.pid], 1.0) is None
        os.kill(proc.pid, signal.SIGSTOP)
        while not is_stopped(proc.pid):  # the kernel stops it at once, but asynchronously
            time.sleep(0.01)
        assert spans.update([proc.pid], 2.0) is None and spans.stopped
        os.kill(proc.pid, signal.SIGCONT)
        while is_stopped(proc.pid):
            time.sleep(0.01)
        assert spans.update([proc.pid], 5.5) == (2.0, 5.5)
        assert spans.finish(6.0) == {
            "total_s": 3.5,
            "spans": [{"at_s": round(2.0 - spans.started_at, 2), "for_s": 3.5}],
        }
    finally:
        proc.kill()
        proc.wait()
