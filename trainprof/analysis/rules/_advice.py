"""A finding's fix lines, checked against the run's facts and given their expected effect.

Each line is the first fix kind it matches (its rule's own, then ``_fixes.SHARED``). A line
whose kind needs what the job lacks (an accelerator, dropout or batch norm, work the loss
does not depend on, workers) is held back, as is one whose model says it cannot help; the
finding's evidence says which and why. A kept line carries its predicted effect, or says it
was not predicted. A framework's settings line is judged setting by setting. A known cheaper
equivalent of what the finding's code spends its time in (``validate_args=False``) comes first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from trainprof.analysis import frameworks, work_kind
from trainprof.analysis.attribution import where
from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._fixes import SHARED, gain
from trainprof.analysis.rules.registry import Effect, Fix, Rule

EXPECTED = " — expected: "
NOT_PREDICTED = " — effect not predicted"
# The work under a finding's line is the model's own when this share of it is inside a module
# call or torch.distributions: the loss depends on it.
MODEL_WORK = 0.5
# A cheaper equivalent is offered where what it removes takes this share of the steady time.
EQUIVALENT_MIN = 0.03
_FRAMEWORK_HEADS = tuple(f"with {name}: " for name in frameworks.NAMES.values())


@dataclass(frozen=True)
class Judged:
    """One fix line after the facts: its text (None: held back) and why it was held back."""

    text: str | None
    fix: Fix
    held: str | None = None


def kind(r: Rule | None, line: str) -> Fix:
    """The fix kind a line is: its rule's own first, then the shared ones (the last matches
    every line)."""
    own = r.fixes if r is not None else ()
    return next(fx for fx in (*own, *SHARED) if fx.is_line(line))


def advise(m: Metrics, r: Rule | None, f: Finding) -> Finding:
    """The finding with its fix lines checked, each with its effect, and what was held back
    said in its evidence."""
    lines = [*_equivalents(m, f), *f.fix]
    known = _loader_workers(m)  # None: no loader configuration seen (attach: no probe)
    workers = known is None or known > 0 or any(_starts_workers(m, r, f, x) for x in lines)
    kept: list[str] = []
    held: list[str] = []
    for line in lines:
        heads = [h for h in _FRAMEWORK_HEADS if line.startswith(h)]
        judged = _framework_line(m, r, f, line, heads[0], workers) if heads else None
        if judged is None:
            judged = _judge(m, r, f, line, workers)
        if judged.text is not None:
            kept.append(judged.text)
        if judged.held and judged.held not in held:
            held.append(judged.held)
    return replace(f, fix=tuple(kept), evidence=(*f.evidence, *held))


def _starts_workers(m: Metrics, r: Rule | None, f: Finding, line: str) -> bool:
    """The line adds workers, and is not held back."""
    fx = kind(r, line)
    if fx.name != "more workers" or _contradicts(m, f, fx, True) is not None:
        return False
    effect = fx.predict(m, f, line) if fx.predict is not None else None
    return effect is None or effect.helps


def _judge(m: Metrics, r: Rule | None, f: Finding, line: str, workers: bool) -> Judged:
    fx = kind(r, line)
    why = _contradicts(m, f, fx, workers)
    if why is not None:
        if fx.clause:  # the line without the words that cannot hold, judged again
            return _judge(m, r, f, re.sub(fx.match, "", line), workers)
        return Judged(None, fx, f"not advised: {fx.name} ({why})")
    effect = fx.predict(m, f, line) if fx.predict is not None else None
    if effect is not None and not effect.helps:
        return Judged(None, fx, f"not advised: {fx.name}: {effect.text}")
    text = line
    if fx.says and fx.says not in text:
        text += f" ({fx.says})"
    return Judged(_with_effect(text, effect), fx)


def _with_effect(text: str, effect: Effect | None) -> str:
    if EXPECTED in text or NOT_PREDICTED in text:
        return text
    if effect is None:
        return text + NOT_PREDICTED
    if not effect.predicted:
        return f"{text}{NOT_PREDICTED}: {effect.text}"
    return text + EXPECTED + effect.text


def _framework_line(
    m: Metrics, r: Rule | None, f: Finding, line: str, head: str, workers: bool
) -> Judged | None:
    """A framework's words for several settings (``a; b; c``), each judged alone; None where
    the line is one setting."""
    body = line[len(head) :]
    parts = body.split("; ")
    if len(parts) < 2:
        return None
    # the first setting may follow a prefix ("the Trainer builds the DataLoader: ...")
    cut = parts[0].rfind(": ") + 2 if ": " in parts[0] else 0
    prefix, parts[0] = parts[0][:cut], parts[0][cut:]
    kept: list[str] = []
    effects: list[str] = []
    held: list[str] = []
    for part in parts:
        judged = _judge(m, r, f, part, workers)
        if judged.held:
            held.append(judged.held)
        if judged.text is None:
            continue
        text, _, effect = judged.text.partition(EXPECTED)
        kept.append(text.replace(NOT_PREDICTED, ""))
        if effect:
            effects.append(f"{judged.fix.name}: {effect}")
    if not kept:
        return Judged(None, kind(r, line), held[0] if held else None)
    text = head + prefix + "; ".join(kept)
    text += EXPECTED + "; ".join(effects) if effects else NOT_PREDICTED
    return Judged(text, kind(r, line), held[0] if held else None)


def _contradicts(m: Metrics, f: Finding, fx: Fix, workers: bool) -> str | None:
    """Why the fix cannot hold for this job (None: nothing measured says so)."""
    if fx.device == "accelerator" and not m.on_cuda:
        return "it needs an accelerator: this job trains on the CPU"
    layers = (m.activity.structure or {}).get("mode_layers")
    if fx.modules == "dropout or batch norm" and layers == []:
        return (
            "the model has no dropout and no batch norm: it computes the same in train() and eval()"
        )
    if fx.loss_free and _feeds_the_loss(m, f):
        return (
            f"the work at {f.where} is the model's own (a module's forward, torch.distributions): "
            "the loss depends on it, and running it less often or elsewhere changes what is learned"
        )
    if fx.needs_workers and not workers:
        return "the loader has no workers"
    return None


def _loader_workers(m: Metrics) -> int | None:
    """The training loader's num_workers; None where no loader's configuration was seen (an
    unknown count contradicts no fix)."""
    if not m.loaders:
        return None
    n = m.loaders[0].config.get("num_workers")
    return n if isinstance(n, int) and not isinstance(n, bool) else None


def in_window(m: Metrics) -> list[tuple[float, tuple[tuple[str, str, int], ...]]]:
    """(seconds, frames) of the main thread's stack samples in the steady window."""
    w = m.activity.window
    spans = m.activity.spans
    if w is None:
        return [(s.t1 - s.t0, s.frames) for s in spans]
    out = []
    for s in spans:
        lo, hi = max(s.t0, w[0]), min(s.t1, w[1])
        if hi > lo:
            out.append((hi - lo, s.frames))
    return out


def _is_model_frame(frame: tuple[str, str, int]) -> bool:
    path = frame[1].replace("\\", "/")
    return path.endswith("torch/nn/modules/module.py") or "torch/distributions/" in path


def _feeds_the_loss(m: Metrics, f: Finding) -> bool:
    """Most of the time under the finding's line is inside a module call or
    torch.distributions (a policy's forward and its sampling, called from the loop), or the
    line runs for a model's forward (a helper the forward calls, a custom autograd Function's
    forward); a forward hook that only observes does not feed it."""
    if f.where is None:
        return False
    under = model = 0.0
    for seconds, frames in in_window(m):
        at = next((i for i, fr in enumerate(frames) if where(fr) == f.where), None)
        if at is None:
            continue
        under += seconds
        if any(_is_model_frame(fr) for fr in frames[at + 1 :]) or (
            _for_a_forward(frames, at)
            and work_kind.of_frames(frames, m.activity.source) in _COMPUTES
        ):
            model += seconds
    return under > 0 and model >= MODEL_WORK * under


# Kinds of work that compute a value (a print or a wait in a forward feeds no loss).
_COMPUTES = frozenset({work_kind.NUMPY, work_kind.TO_HOST, work_kind.TORCH, work_kind.PYTHON})


def _for_a_forward(frames: tuple[tuple[str, str, int], ...], at: int) -> bool:
    """Frame ``at`` runs within a ``forward`` that a module call or an autograd Function's
    apply called: the model's own computation, not a hook beside it."""
    for caller, callee in zip(frames[:at], frames[1 : at + 1], strict=False):
        path = caller[1].replace("\\", "/")
        calls_forward = _is_model_frame(caller) or path.endswith("torch/autograd/function.py")
        if calls_forward and callee[0].rsplit(".", 1)[-1] == "forward":
            return True
    return False


def validating(frames: tuple[tuple[str, str, int], ...]) -> bool:
    """Inside torch.distributions' checks of its arguments or samples."""
    for name, path, _line in frames:
        p = path.replace("\\", "/")
        if "torch/distributions/" not in p:
            continue
        if p.endswith("constraints.py") or name.endswith(("_validate_sample", "_validate_args")):
            return True
    return False


def checks_share(m: Metrics, at: str | None = None) -> float:
    """The share of the steady window inside torch.distributions' checks (under line ``at``
    where given)."""
    samples = in_window(m)
    total = sum(s for s, _ in samples)
    checking = sum(
        s
        for s, frames in samples
        if validating(frames) and (at is None or any(where(x) == at for x in frames))
    )
    return checking / total if total > 0 else 0.0


def validate_args_fix(share: float) -> str:
    """The cheaper equivalent of torch.distributions' checks, with what it removes."""
    return (
        "torch.distributions checks its arguments on every call: pass validate_args=False "
        "(Categorical(probs, validate_args=False)), or once "
        "torch.distributions.Distribution.set_default_validate_args(False); the same samples "
        f"and log-probabilities{EXPECTED}up to {gain(1.0 - share):+.0%} samples/s (the checks "
        f"take {share:.0%} of the time)"
    )


def _equivalents(m: Metrics, f: Finding) -> list[str]:
    """Known cheaper equivalents of what the stacks under the finding's line spend their time
    in, each with the share of the steady time it removes."""
    if f.where is None or any("validate_args=False" in x for x in f.fix):
        return []
    share = checks_share(m, f.where)
    return [validate_args_fix(share)] if share >= EQUIVALENT_MIN else []
