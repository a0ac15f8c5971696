"""The line that calls backward, as the forward pass's end: a callback named after backward is not
it. Blind set B's gradient monitor runs `cb.on_after_backward(...)` right after
`loss.backward()`; a torn py-spy sample of backward under the hook's line made the hook's
numpy work the forward pass, and loop-overhead found nothing (2 runs in 6)."""

from __future__ import annotations

import pytest

from trainprof.analysis.attribution import backward_sites, by_position, categoriser
from trainprof.store.stacks import StackSpan

TRAIN = "/home/user/proj/train.py"
AUTOGRAD = ("backward", "/venv/site-packages/torch/autograd/__init__.py", 1)
SOURCE = {
    (TRAIN, 20): "loss = model(x)",
    (TRAIN, 22): "loss.backward()",
    (TRAIN, 24): "cb.on_after_backward(self, step)",
    (TRAIN, 40): "v = t.detach().cpu().numpy().ravel()",
}
FIT = ("fit", TRAIN)


def test_a_hook_named_after_backward_is_not_where_backward_is_called() -> None:
    backward = StackSpan(0.0, 0.1, (("fit", TRAIN, 22), AUTOGRAD))
    torn = StackSpan(0.1, 0.11, (("fit", TRAIN, 24), AUTOGRAD))  # a torn sample
    assert backward_sites([backward, torn], SOURCE) == {FIT: 22}


def test_the_hooks_own_work_after_backward_stays_loop_work() -> None:
    backward = StackSpan(0.0, 0.1, (("fit", TRAIN, 22), AUTOGRAD))
    torn = StackSpan(0.1, 0.11, (("fit", TRAIN, 24), AUTOGRAD))
    hook = (("fit", TRAIN, 24), ("GradHealthMonitor.summarize", TRAIN, 40))
    step = by_position(categoriser(SOURCE), backward_sites([backward, torn], SOURCE))
    assert step(hook) == "other"
    assert step((("fit", TRAIN, 20),)) == "forward"  # the user's code before backward


@pytest.mark.parametrize(
    "line",
    [
        "loss.backward()",
        "scaler.scale(loss).backward()",
        "accelerator.backward(loss)",
        "self.manual_backward(loss)",
        "torch.autograd.backward(outputs, grads)",
    ],
)
def test_every_way_of_calling_backward_is_a_site(line: str) -> None:
    source = {**SOURCE, (TRAIN, 22): line}
    span = StackSpan(0.0, 0.1, (("fit", TRAIN, 22), AUTOGRAD))
    assert backward_sites([span], source) == {FIT: 22}
