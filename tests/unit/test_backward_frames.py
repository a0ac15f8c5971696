"""Which stacks are backward: autograd's backward machinery anywhere on the stack, including a
module's forward that activation checkpointing recomputes inside it; not every torch/autograd
frame (a @torch.no_grad() function runs under grad_mode.py's wrapper, a custom Function's
forward under function.py's apply)."""

from __future__ import annotations

from trainprof.analysis.attribution import category

TRAIN = "/home/u/train.py"
TORCH = "/venv/lib/python3.12/site-packages/torch"
LOOP = ("main", TRAIN, 40)
BACKWARD = (
    LOOP,
    ("Tensor.backward", f"{TORCH}/_tensor.py", 625),
    ("backward", f"{TORCH}/autograd/__init__.py", 354),
    ("_engine_run_backward", f"{TORCH}/autograd/graph.py", 841),
)
RECOMPUTE = (
    *BACKWARD,
    ("_checkpoint_hook.__init__.<locals>.unpack_hook", f"{TORCH}/utils/checkpoint.py", 1129),
    ("Module._call_impl", f"{TORCH}/nn/modules/module.py", 1747),
    ("Linear.forward", f"{TORCH}/nn/modules/linear.py", 125),
)
NO_GRAD = (
    ("<module>", TRAIN, 90),
    (
        "_DecoratorContextManager.__call__.<locals>.decorate_context",
        f"{TORCH}/autograd/grad_mode.py",
        116,
    ),
    ("update_ema", TRAIN, 61),
)
CUSTOM_FORWARD = (
    LOOP,
    ("Function.apply", f"{TORCH}/autograd/function.py", 575),
    ("ClampGrad.forward", TRAIN, 12),
)
CUSTOM_BACKWARD = (
    *BACKWARD,
    ("BackwardCFunction.apply", f"{TORCH}/autograd/function.py", 307),
    ("ClampGrad.backward", TRAIN, 16),
)


def test_backward_is_backward() -> None:
    assert category(BACKWARD, {}) == "backward"
    assert category(CUSTOM_BACKWARD, {}) == "backward"


def test_a_forward_recomputed_inside_backward_is_backward() -> None:
    assert category(RECOMPUTE, {}) == "backward"
    assert category((LOOP, *RECOMPUTE[-2:]), {}) == "forward"


def test_a_no_grad_function_and_a_custom_forward_are_not_backward() -> None:
    assert category(NO_GRAD, {}) == "other"
    assert category(CUSTOM_FORWARD, {}) == "other"
