"""A silence at work or a hang, from looks at the job's stacks and I/O (samplers/at_work.py)."""

from __future__ import annotations

from trainprof.samplers.at_work import MOVED_BYTES, Look, why_at_work
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
