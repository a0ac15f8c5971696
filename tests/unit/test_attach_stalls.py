"""attach's stalls from stacks alone: a gap between backward/optimizer samples filled with
forward passes is an evaluation only if the thread moved; one forward stack held unchanged
is a thread that did not run (descheduled on a loaded machine), not an evaluation."""

from __future__ import annotations

from trainprof.attach.analysis import find_stalls
from trainprof.store.stacks import StackSpan

TRAIN = "/home/user/proj/train.py"
TORCH = "/venv/site-packages/torch"
FORWARD = (("<module>", TRAIN, 1), ("Module._call_impl", f"{TORCH}/nn/modules/module.py", 1))
LAYER = (*FORWARD, ("Linear.forward", f"{TORCH}/nn/modules/linear.py", 2))
BACKWARD = (("<module>", TRAIN, 3), ("backward", f"{TORCH}/autograd/__init__.py", 1))
LOADER = (("<module>", TRAIN, 9), ("__next__", f"{TORCH}/utils/data/dataloader.py", 1))


def loop(gap: list[tuple[float, tuple[tuple[str, str, int], ...]]]) -> list[StackSpan]:
    """20 steps of 10 ms (forward 4, backward 6), then ``gap`` (durations and stacks), then 20
    more steps."""
    spans, t = [], 0.0

    def add(d: float, frames: tuple[tuple[str, str, int], ...]) -> None:
        nonlocal t
        spans.append(StackSpan(t, t + d, frames))
        t += d

    for _ in range(20):
        add(0.004, FORWARD)
        add(0.006, BACKWARD)
    for d, frames in gap:
        add(d, frames)
    for _ in range(20):
        add(0.004, FORWARD)
        add(0.006, BACKWARD)
    return spans


def test_an_evaluation_of_many_batches_is_one() -> None:
    batches = [(0.004, LOADER), (0.01, FORWARD), (0.01, LAYER)] * 25  # 0.6 s
    (stall,) = find_stalls(loop(batches), {}, None)
    assert stall.cause == "eval"


def test_a_thread_frozen_in_one_forward_is_no_evaluation() -> None:
    assert find_stalls(loop([(0.35, FORWARD)]), {}, None) == []


def test_a_restarts_start_up_before_its_first_forward_is_no_evaluation() -> None:
    """The shape a CI run called an evaluation: a new dataset built, workers starting, then
    the first forward passes: 0.23 s of gap, but only 0.16 s of forward (under 0.2 s)."""
    init = (("<module>", TRAIN, 5), ("Images.__init__", TRAIN, 20))
    restart = [(0.035, init), (0.01, LOADER)] + [(0.01, FORWARD), (0.01, LAYER)] * 8
    assert all(s.cause != "eval" for s in find_stalls(loop(restart), {}, None))
