"""What a CPU stall was, from the main thread's stacks during it: an evaluation runs the model
(forward passes, no backward), while a pseudo-label refresh runs it once and then spends longer
in its own Python: that is CPU work (found when a loaded machine slowed the cpu-stall zoo
script's no_grad forward to 45 % of its stall, and to 52 % in a later CI run: an evaluation's
forward is at least twice the rest)."""

from __future__ import annotations

import pytest

from trainprof.analysis.stalls import Stall, period, refine
from trainprof.store.stacks import StackSpan

TRAIN = "/home/user/proj/train.py"
FORWARD = (
    ("<module>", TRAIN, 1),
    ("refresh", TRAIN, 20),
    ("Module._call_impl", "/venv/site-packages/torch/nn/modules/module.py", 1),
)
SEARCH = (("<module>", TRAIN, 1), ("refresh", TRAIN, 21), ("viterbi", TRAIN, 40))
LOADER = (
    ("<module>", TRAIN, 1),
    ("validate", TRAIN, 30),
    ("_BaseDataLoaderIter.__next__", "/venv/site-packages/torch/utils/data/dataloader.py", 1),
)


def cause(forward: float, rest: tuple[tuple[str, str, int], ...]) -> str:
    """A 1 s stall sampled every 10 ms: ``forward`` of it in the model, the rest in ``rest``."""
    spans = []
    for i in range(100):
        frames = FORWARD if i < forward * 100 else rest
        spans.append(StackSpan(10.0 + i * 0.01, 10.0 + (i + 1) * 0.01, frames))
    (st,), _evals = refine([Stall(50, 10.0, 11.0, 0.95, "cpu")], spans, {}, [])
    return st.cause


@pytest.mark.parametrize(
    ("forward", "expected"),
    [(0.45, "cpu"), (0.32, "cpu"), (0.52, "cpu"), (0.68, "eval"), (0.7, "eval")],
)
def test_a_forward_then_longer_python_work_is_cpu_work(forward: float, expected: str) -> None:
    assert cause(forward, SEARCH) == expected


def test_forward_passes_and_their_loader_are_an_evaluation() -> None:
    assert cause(0.45, LOADER) == "eval"


PRINT_LOSS = (("<module>", TRAIN, 1), ("main", TRAIN, 70))
SOURCE = {(TRAIN, 70): '    print(f"epoch {epoch}: loss {loss.item():.3f}")'}


def test_a_stall_in_item_on_a_gpu_job_waits_for_the_gpu() -> None:
    # An H200 fp32 run printed loss.item() every 80 steps: the host, far ahead of the busy
    # GPU, waited 290 ms there each time, and the stall read "CPU work in the loop".
    spans = [StackSpan(10.0 + i * 0.01, 10.0 + (i + 1) * 0.01, PRINT_LOSS) for i in range(100)]
    stall = Stall(80, 10.0, 11.0, 0.95, "cpu")
    (on_gpu,), _e = refine([stall], spans, SOURCE, [], cuda=True)
    assert on_gpu.cause == "sync"
    (on_cpu,), _e = refine([stall], spans, SOURCE, [], cuda=False)
    # on a CPU job .item() is no sync: the line's own work counts, and it prints
    assert on_cpu.cause == "logging"


def test_a_thread_frozen_in_one_forward_stack_evaluated_nothing() -> None:
    """One forward stack held unchanged through a stall: the thread did not run (descheduled
    on a loaded machine); evaluations run many forward passes, and their stacks change."""
    spans = [StackSpan(10.0, 10.8, FORWARD), StackSpan(10.8, 11.0, SEARCH)]
    (st,), evals = refine([Stall(50, 10.0, 11.0, 0.95, "cpu")], spans, {}, [])
    assert st.cause != "eval" and evals == []


def test_a_stall_and_the_slow_steps_after_it_recur_as_one_event() -> None:
    """A sleep every 10 steps, each followed by three slower steps (a real run's, no stacks):
    every 10 steps, not every step."""
    clusters = [i for start in range(20, 300, 10) for i in range(start, start + 4)]
    assert period(clusters) == 10
    assert period([5, 6, 7, 8, 9, 10]) is None  # one long slow stretch: one event
    assert period(list(range(20, 300, 10))) == 10


def test_saves_the_samples_missed_are_the_checkpoint_routine_the_others_showed() -> None:
    """Every 10 steps a probe-timed torch.save inside a 0.1 s stall; fsync and copy after it.
    Where the stacks show the save routine in four stalls of five, the fifth (its samples in the
    optimizer step on either side of the save) is the checkpoint's too; with two of five, no."""
    from trainprof.analysis.stalls import Segment, saving_calls

    adam = ("adam", "/venv/site-packages/torch/optim/adam.py", 9)
    saving = (("<module>", TRAIN, 1), ("fit", TRAIN, 112), ("save_checkpoint", TRAIN, 42))
    stepping = (("<module>", TRAIN, 1), ("fit", TRAIN, 108), adam)
    loop = frozenset({("fit", TRAIN), ("<module>", TRAIN)})

    def causes(shown: int) -> list[str]:
        stalls, saves, spans = [], [], []
        for k in range(5):
            t0 = 10.0 * k
            stalls.append(Stall(10 * k, t0, t0 + 0.1, 0.09, "cpu"))
            saves.append(Segment(t0 + 0.001, t0 + 0.03))
            first = saving if k < shown else stepping
            spans += [StackSpan(t0, t0 + 0.07, first), StackSpan(t0 + 0.07, t0 + 0.1, stepping)]
        return [st.cause for st in saving_calls(stalls, saves, spans, loop)]

    assert causes(4) == ["checkpoint"] * 5
    assert causes(2) == ["checkpoint", "checkpoint", "cpu", "cpu", "cpu"]
