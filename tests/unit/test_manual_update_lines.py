"""A parameter updated by hand, in a loop without torch.optim, is the optimizer step: its
in-place tensor ops run in the user's own lines (the zoo's manual_update, a healthy job, read
loop-overhead 29 % in a CI run). Per-step statistics of the gradients stay loop work."""

from __future__ import annotations

from trainprof.analysis.attribution import category

TRAIN = "/home/u/train.py"
SOURCE = {
    (TRAIN, 30): "                v.mul_(MOMENTUM).add_(p.grad)",
    (TRAIN, 31): "                p.sub_(LR * v)",
    (
        TRAIN,
        40,
    ): '            stats[name] = {"norm": grad.norm().item(), "max": grad.abs().max().item()}',
}


def _at(line: int) -> str:
    return category((("<module>", TRAIN, 1), ("main", TRAIN, line)), SOURCE)


def test_an_update_by_hand_is_the_optimizer_step() -> None:
    assert _at(30) == "optimizer"
    assert _at(31) == "optimizer"


def test_gradient_statistics_stay_loop_work() -> None:
    assert _at(40) == "other"
