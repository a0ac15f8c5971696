"""The job's train()/eval() switches, and its zero_grad, autocast and optimizers in early steps.

``train()`` is watched for the whole run (a top-level switch is an ``M`` record, and the module
trained first is the model); ``zero_grad`` and ``autocast`` over the first ``WATCH_STEPS``
optimizer steps only, and ``Optimizer.__init__`` until the first: then each wrapper takes itself
out (a training loop calls them the same way every step, and each wrapper is a Python call a
step, dear on the cold caches of a fast GPU loop).
"""

from __future__ import annotations

import functools
import time
from typing import Any

from trainprof.probe import records
from trainprof.probe.state import State, state, weak
from trainprof.store.schema import MODE

_clock = time.monotonic
WATCH_STEPS = 2


def install(torch: Any, off: frozenset[str]) -> None:
    """``train()`` (the ``mode`` part), ``zero_grad`` and ``autocast`` (``precision``) and
    ``Optimizer.__init__`` (``steps``)."""
    if "mode" not in off:
        torch.nn.Module.train = _watched_train(torch.nn.Module.train)
    if "precision" not in off:
        ac = torch.amp.autocast_mode.autocast
        ac.__enter__ = _noticed_autocast(ac, ac.__enter__)
        opt_cls = torch.optim.Optimizer
        opt_cls.zero_grad = _noticed_zero_grad(opt_cls, opt_cls.zero_grad)
    if "steps" not in off:
        opt_cls = torch.optim.Optimizer
        opt_cls.__init__ = _noticed_optimizer(opt_cls, opt_cls.__init__)  # type: ignore[method-assign]


def mode_restored(s: State, now: float) -> None:
    """Called for each batch while the probe thinks the model evaluates: a model put back in
    training mode without ``train()`` (Lightning restores each module's ``training`` flag by
    assignment after validation) ends the evaluation here, as its next training batch comes."""
    ref = s.model_ref
    model = ref() if ref is not None else None
    if model is None or getattr(model, "training", False) is not True:
        return
    s.training = True
    w = records.writer()
    if w is not None:
        w.add(f"{MODE} {w.us(now)} 1\n")


def unwrap(owner: Any, name: str, wrapper: Any, orig: Any) -> None:
    """Put ``orig`` back, unless something else has wrapped ``wrapper`` since."""
    if vars(owner).get(name) is wrapper:
        setattr(owner, name, orig)


def _watched_train(orig: Any) -> Any:
    @functools.wraps(orig)
    def train(self: Any, mode: bool = True) -> Any:
        s = state
        s.train_depth += 1
        try:
            return orig(self, mode)
        finally:
            s.train_depth -= 1
            if s.train_depth == 0 and s.model_ref is None:
                _remember_model(self)
            if s.train_depth == 0 and s.training is not bool(mode):
                s.training = bool(mode)
                w = records.writer()
                if w is not None:
                    w.add(f"{MODE} {w.us(_clock())} {int(bool(mode))}\n")

    return train


def _remember_model(module: Any) -> None:
    import weakref

    try:
        state.model_ref = weakref.ref(module)
    except TypeError:
        pass


def _noticed_zero_grad(owner: type, orig: Any) -> Any:
    """``Optimizer.zero_grad``: a call with ``set_to_none=False`` is recorded once; the wrapper
    leaves once that is seen or the job has made ``WATCH_STEPS`` optimizer steps."""

    @functools.wraps(orig)
    def zero_grad(self: Any, set_to_none: bool = True) -> Any:
        s = state
        if not set_to_none and not s.zero_grad_kept:
            s.zero_grad_kept = True
            records.record_info({"zero_grad_set_to_none": False})
        if s.zero_grad_kept or s.steps >= WATCH_STEPS:
            unwrap(owner, "zero_grad", zero_grad, orig)
        return orig(self, set_to_none)

    return zero_grad


def _noticed_optimizer(owner: type, orig: Any) -> Any:
    """``Optimizer.__init__`` until the first optimizer step: the job has a torch optimizer (with
    ``--steps``, its optimizer steps are what it counts: see ``steps.early_step``), and each one
    made before training, whose parameters the first step compares with the model's (a GAN's
    two, say: ``first_step``). Leaves at the first optimizer made after that step."""

    @functools.wraps(orig)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        s = state
        s.optimizer_made = True
        if s.steps:
            unwrap(owner, "__init__", __init__, orig)
        else:
            s.made_optimizers.append(weak(self))
        orig(self, *args, **kwargs)

    return __init__


def _noticed_autocast(owner: type, orig: Any) -> Any:
    """``autocast.__enter__``: each enabled device and dtype is recorded once; the wrapper leaves
    at the first enabled autocast after ``WATCH_STEPS`` optimizer steps (the training step's
    own has been seen by then). A job without autocast never calls it."""
    seen: set[tuple[str, str]] = set()

    @functools.wraps(orig)
    def __enter__(self: Any) -> Any:
        if getattr(self, "_enabled", True):
            key = (str(getattr(self, "device", "?")), str(getattr(self, "fast_dtype", "?")))
            if key not in seen:
                seen.add(key)
                records.record_info({"autocast": key[0], "dtype": key[1]})
            if state.steps >= WATCH_STEPS:
                unwrap(owner, "__enter__", __enter__, orig)
        return orig(self)

    return __enter__
