"""A silence at work or a hang, from looks at the job's stacks and I/O (samplers/at_work.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import live_group_members

from trainprof.collect.samplers.at_work import MOVED_BYTES, Look, look, why_at_work
from trainprof.collect.samplers.pyspy import py_spy_path
from trainprof.store.stacks import Frame

WAIT_FOR_BATCH: tuple[Frame, ...] = (
    ("wait", "/usr/lib/python3.12/threading.py", 359),
    ("_try_get_data", "/site-packages/torch/utils/data/dataloader.py", 1133),
    ("train", "/home/u/train.py", 40),
    ("<module>", "/home/u/train.py", 52),
)
IN_FORWARD: tuple[Frame, ...] = (
    ("Linear.forward", "/site-packages/torch/nn/modules/linear.py", 125),
    ("evaluate", "/home/u/train.py", 61),
    ("<module>", "/home/u/train.py", 70),
)
IN_ACCURACY: tuple[Frame, ...] = (("evaluate", "/home/u/train.py", 62), IN_FORWARD[-1])


def looks(*stacks: tuple[Frame, ...], io: list[int | None] | None = None) -> list[Look]:
    io = io if io is not None else [1000] * len(stacks)
    return [Look(0.25 * i, io[i], ((7, s),)) for i, s in enumerate(stacks)]


def test_a_stack_that_keeps_still_and_no_io_is_a_hang() -> None:
    assert why_at_work(looks(*[WAIT_FOR_BATCH] * 8)) is None


def test_a_stack_that_moves_is_work_and_says_where() -> None:
    why = why_at_work(looks(IN_FORWARD, IN_FORWARD, IN_ACCURACY, IN_FORWARD))
    assert why is not None and "pid 7 moved" in why and "evaluate()" in why, why


def test_bytes_read_or_written_are_work_even_from_one_line() -> None:
    still = [WAIT_FOR_BATCH] * 8
    assert why_at_work(looks(*still, io=[0] * 7 + [MOVED_BYTES])) is not None
    assert why_at_work(looks(*still, io=[0] * 7 + [MOVED_BYTES - 1])) is None


def test_unread_io_and_no_stacks_are_not_taken_for_work() -> None:
    unread = [Look(0.25 * i, None, ()) for i in range(8)]
    assert why_at_work(unread) is None
    assert why_at_work(looks(IN_FORWARD)) is None  # one look tells nothing


def test_a_worker_at_work_under_a_waiting_main_process_is_seen(tmp_path: Path) -> None:
    """Real processes, real py-spy: a main process that waits (its stack still) for a child
    that computes in three functions by turns (a DataLoader worker making a slow batch): the
    child's stack moved, the main process's did not."""
    if py_spy_path() is None:
        pytest.skip("py-spy is not installed")
    script = tmp_path / "job.py"
    script.write_text(SLOW_WORKER)
    job = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    looks = []
    try:
        assert job.stdout is not None and job.stdout.readline().strip() == "started"
        child_proc = psutil.Process(job.pid).children()[0]
        child = child_proc.pid
        for i in range(8):
            looks.append(look(job.pid, [job.pid], 0.1 * i))
            time.sleep(0.1)
    finally:  # the whole group: the child, forked, would outlive its parent and spin on
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    psutil.wait_procs([child_proc], timeout=5)
    assert live_group_members(job.pid) == []
    main = [Look(one.t, None, tuple(s for s in one.stacks if s[0] == job.pid)) for one in looks]
    assert all(one.stacks for one in main) and why_at_work(main) is None  # it waits
    why = why_at_work(looks)
    assert why is not None and f"pid {child} moved" in why, (why, looks)


SLOW_WORKER = """
import multiprocessing as mp, time

def decode(end):
    while time.monotonic() < end: sum(i * i for i in range(1000))

def resize(end):
    while time.monotonic() < end: sorted(range(1000), key=lambda i: -i)

def normalize(end):
    while time.monotonic() < end: [float(i) / 3 for i in range(1000)]

def worker():
    while True:
        for step in (decode, resize, normalize):
            step(time.monotonic() + 0.05)

if __name__ == "__main__":
    p = mp.get_context("fork").Process(target=worker)
    p.start()
    print("started", flush=True)
    p.join()
"""
