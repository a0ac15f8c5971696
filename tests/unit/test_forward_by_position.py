"""A forward pass written as the user's own tensor code (``x @ w``, a loss by hand) has no torch
module frame for py-spy to show: it is the forward by its place, before the backward call in the
function that makes it, and not "other host work in the loop" (a healthy functional-model job
got loop-overhead 30 % from it)."""

from __future__ import annotations

from trainprof.analysis.attribution import backward_sites, profile
from trainprof.store.stacks import StackSpan

TRAIN = "/home/u/train.py"
SOURCE = {
    (TRAIN, 9): "    h = torch.relu(x @ w1)",
    (TRAIN, 19): "    loss = loss_fn(net(x), y)",
    (TRAIN, 21): "    loss.backward()",
    (TRAIN, 23): "    stats = [p.grad.norm().item() for p in params]",
    (TRAIN, 40): "trainer.fit(model)",
    (TRAIN, 50): "    return self.head(x).sum()",
}
FORWARD = (("<module>", TRAIN, 19), ("net", TRAIN, 9))
BACKWARD = (
    ("<module>", TRAIN, 21),
    ("Tensor.backward", "/venv/site-packages/torch/_tensor.py", 626),
    ("backward", "/venv/site-packages/torch/autograd/__init__.py", 347),
)
AFTER = (("<module>", TRAIN, 23), ("<listcomp>", TRAIN, 23))


def _spans(*stacks: tuple[tuple[str, str, int], ...]) -> list[StackSpan]:
    """One 10 ms sample per stack, in order."""
    return [StackSpan(i * 0.01, (i + 1) * 0.01, frames) for i, frames in enumerate(stacks)]


def test_user_tensor_code_before_the_backward_call_is_the_forward() -> None:
    prof = profile(_spans(FORWARD, FORWARD, BACKWARD, AFTER), SOURCE, 0.0, 1.0)
    assert round(prof.seconds["forward"], 3) == 0.02
    assert round(prof.seconds["backward"], 3) == 0.01
    assert round(prof.seconds["other"], 3) == 0.01  # the grad-norm loop after it stays loop work
    assert prof.top_line("other") == ("<listcomp>", TRAIN, 23)


def test_without_a_backward_sample_the_place_is_unknown() -> None:
    prof = profile(_spans(FORWARD, AFTER), SOURCE, 0.0, 1.0)
    assert round(prof.seconds["other"], 3) == 0.02
    assert "forward" not in prof.seconds


def test_a_framework_line_under_which_backward_runs_is_no_site() -> None:
    """`trainer.fit(model)`: every sample of the run passes through that line, so it cannot
    place anything before the backward call."""
    fit = ("<module>", TRAIN, 40)
    backward = (fit, ("Loop.run", "/venv/site-packages/lightning/loop.py", 10), *BACKWARD[1:])
    hook = (fit, ("Loop.run", "/venv/site-packages/lightning/loop.py", 12), ("on_end", TRAIN, 23))
    spans = _spans(backward, hook)
    assert backward_sites(spans, SOURCE) == {}
    assert round(profile(spans, SOURCE, 0.0, 1.0).seconds["other"], 3) == 0.01


def test_the_last_backward_call_of_a_function_bounds_its_forward() -> None:
    """Two backward calls in one loop (a GAN's D and G): the code between them is forward."""
    source = {**SOURCE, (TRAIN, 30): "    g_loss.backward()"}
    g_backward = (("<module>", TRAIN, 30), *BACKWARD[1:])
    spans = _spans(BACKWARD, g_backward, AFTER)  # AFTER (line 23) lies before line 30
    assert backward_sites(spans, source) == {("<module>", TRAIN): 30}
    assert round(profile(spans, source, 0.0, 1.0).seconds["forward"], 3) == 0.01


def test_attachs_ledger_splits_the_step_the_same_way() -> None:
    """attach's time ledger, from the same stacks: a functional model's forward was "other
    host work in the loop" there (26 % of a healthy job), while `run`'s split said forward."""
    from trainprof.analysis.ledger_from_stacks import build_ledger

    led = build_ledger(_spans(FORWARD, FORWARD, BACKWARD, AFTER), SOURCE, (0.0, 0.04), [])
    assert round(led.seconds["forward"], 3) == 0.02
    assert round(led.seconds["backward"], 3) == 0.01
    assert round(led.seconds["loop"], 3) == 0.01


def test_standard_library_work_before_the_backward_call_is_host_work() -> None:
    """A replay buffer's ``copy.deepcopy`` of the sampled batch runs before ``loss.backward()``
    too, but in the standard library's code, not the model's: blind set E's DQN learner had
    its 41 % of deep copies read as its forward pass, and no finding."""
    sample = ("<module>", TRAIN, 19), ("ReplayBuffer.sample", TRAIN, 30)
    deepcopy = (*sample, ("deepcopy", "/usr/lib/python3.11/copy.py", 136))
    draw = (*sample, ("Random.sample", "/usr/local/lib/python3.12/random.py", 430))
    prof = profile(_spans(deepcopy, draw, FORWARD, BACKWARD), SOURCE, 0.0, 1.0)
    assert round(prof.seconds["other"], 3) == 0.02
    assert prof.top_line("other") == ("ReplayBuffer.sample", TRAIN, 30)
    assert round(prof.seconds["forward"], 3) == 0.01  # the user's own tensor code
