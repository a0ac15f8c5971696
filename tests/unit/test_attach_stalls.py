"""attach's stalls from stacks alone: a gap between backward/optimizer samples filled with
forward passes is an evaluation only if the thread moved and the passes were called from
elsewhere than the training step's forward; one forward stack held unchanged is a thread that
did not run (descheduled on a loaded machine), and the step's own forward slowed down is a
slow step, neither an evaluation."""

from __future__ import annotations

import random

from trainprof.analysis.attribution import category
from trainprof.analysis.gap_stalls import find_stalls
from trainprof.store.stacks import StackSpan

TRAIN = "/home/user/proj/train.py"
TORCH = "/venv/site-packages/torch"
FORWARD = (("<module>", TRAIN, 1), ("Module._call_impl", f"{TORCH}/nn/modules/module.py", 1))
LAYER = (*FORWARD, ("Linear.forward", f"{TORCH}/nn/modules/linear.py", 2))
BACKWARD = (("<module>", TRAIN, 3), ("backward", f"{TORCH}/autograd/__init__.py", 1))
LOADER = (("<module>", TRAIN, 9), ("__next__", f"{TORCH}/utils/data/dataloader.py", 1))
EVALUATE = (("<module>", TRAIN, 7), ("evaluate", TRAIN, 30))
EVAL_FORWARD = (*EVALUATE, *FORWARD[1:])
EVAL_LAYER = (*EVALUATE, *LAYER[1:])


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
    batches = [(0.004, LOADER), (0.01, EVAL_FORWARD), (0.01, EVAL_LAYER)] * 25  # 0.6 s
    (stall,) = find_stalls(loop(batches), {})
    assert stall.cause == "eval"


def test_an_evaluation_still_running_when_sampling_ends_leaves_the_others_alone() -> None:
    """Forward passes after the last backward are no ordinary step's: the evaluation that
    runs there must not make the evaluations' call site the training step's."""
    batches = [(0.004, LOADER), (0.01, EVAL_FORWARD), (0.01, EVAL_LAYER)] * 25
    spans = loop(batches)
    t = spans[-1].t1
    spans += [StackSpan(t, t + 0.01, EVAL_FORWARD), StackSpan(t + 0.01, t + 0.02, EVAL_LAYER)]
    assert [s.cause for s in find_stalls(spans, {})] == ["eval"]


def test_the_steps_own_forward_slowed_down_is_no_evaluation() -> None:
    """The shape a CI run called an evaluation: a new epoch's loader reset, then one forward
    pass of the training step, ten times its usual length while the workers took both cores:
    its stacks change (not held), but it is called from the step's forward line."""
    slow = [(0.024, LOADER)] + [(0.01, FORWARD), (0.01, LAYER)] * 12
    assert all(s.cause != "eval" for s in find_stalls(loop(slow), {}))


def test_a_thread_frozen_in_one_forward_is_no_evaluation() -> None:
    assert find_stalls(loop([(0.35, FORWARD)]), {}) == []


def test_a_restarts_start_up_before_its_first_forward_is_no_evaluation() -> None:
    """The shape a CI run called an evaluation: a new dataset built, workers starting, then
    the first forward passes of the training step (its own forward line), 0.16 s of them."""
    init = (("<module>", TRAIN, 5), ("Images.__init__", TRAIN, 20))
    restart = [(0.035, init), (0.01, LOADER)] + [(0.01, FORWARD), (0.01, LAYER)] * 8
    assert all(s.cause != "eval" for s in find_stalls(loop(restart), {}))


def test_building_the_model_is_no_forward_pass() -> None:
    """A restart builds its model again: nn.Module constructors are not forward work."""
    build = (
        ("<module>", TRAIN, 5),
        ("SmallResNet.__init__", TRAIN, 48),
        ("Conv2d.__init__", f"{TORCH}/nn/modules/conv.py", 531),
        ("Module.__setattr__", f"{TORCH}/nn/modules/module.py", 2031),
    )
    assert category(build, {}) == "other"
    assert category(LAYER, {}) == "forward"


def test_a_short_validation_from_its_own_line_is_an_evaluation() -> None:
    """0.1 s of validation (10 steps' worth) every few steps is an evaluation: short ones
    count too once they are told apart from the training step's own forward."""
    batches = [(0.002, LOADER), (0.004, EVAL_FORWARD), (0.004, EVAL_LAYER)] * 10  # 0.1 s
    (stall,) = find_stalls(loop(batches), {})
    assert stall.cause == "eval"


LOGGING = (("<module>", TRAIN, 12), ("print", "<built-in>", 0))
SEARCH = (("<module>", TRAIN, 14), ("search", TRAIN, 40))


def sampled(stall_every: int | None, steps: int = 2400, dt: float = 1 / 197) -> list[StackSpan]:
    """py-spy's view of a loop of ~3 ms steps (80 % forward and printing, 20 % backward),
    faster than its samples every ``dt``: each sample lands at a random phase of a step. With
    ``stall_every``, a 0.3 s search runs every that many steps."""
    rng = random.Random(7)
    phases: list[tuple[float, tuple[tuple[str, str, int], ...]]] = []  # (end, frames)
    t = 0.0
    for i in range(steps):
        if stall_every and i % stall_every == stall_every - 1:
            t += 0.3
            phases.append((t, SEARCH))
        d = rng.uniform(0.002, 0.004)
        phases += [(t + 0.4 * d, FORWARD), (t + 0.8 * d, LOGGING), (t + d, BACKWARD)]
        t += d
    spans, k, at = [], 0, rng.uniform(0, dt)
    while at < t:
        while phases[k][0] <= at:
            k += 1
        spans.append(StackSpan(at, at + dt, phases[k][1]))
        at += dt * rng.uniform(0.9, 1.1)
    return spans


def test_gaps_from_sampling_a_loop_faster_than_the_samples_are_no_stalls() -> None:
    """The shape a logging-heavy loop of 3 ms steps gave attach at 197 Hz: its backward
    samples fall at random phases, the gaps between them run from 3 to 200 ms, and a tenth of
    them were called CPU stalls (24 % "stalls: CPU work" of a job that has none)."""
    assert find_stalls(sampled(None), {}) == []


def test_a_real_stall_stands_out_of_a_fast_loops_sampling_gaps() -> None:
    found = find_stalls(sampled(stall_every=300), {})
    assert len(found) == 8 and {s.cause for s in found} == {"cpu"}
