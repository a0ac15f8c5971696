"""Eval stall: evaluation between training steps takes a large share of the run.

Recognised by a top-level ``model.eval()`` … ``model.train()`` switch, or, without one, by a
stall in which the main thread ran forward passes and no backward (validation under
``torch.no_grad()`` alone) or iterated another DataLoader.

Anti-pattern::

    if step % 20 == 0:
        with torch.no_grad():            # no model.eval(): dropout and batch norm stay in
            val_loss = sum(loss_fn(model(x), y) for x, y in val_loader)  # training mode

Best practice::

    if step % 1000 == 0:
        model.eval()
        with torch.inference_mode():
            val_loss = evaluate(model, val_subset_loader)
        model.train()
"""

from __future__ import annotations

from trainprof.analysis import frameworks
from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._common import interval, ms, site
from trainprof.analysis.rules._handover import HANDOVER, main_batch_s
from trainprof.analysis.rules.registry import FROM_STACKS, Threshold, rule
from trainprof.units import plural

SHARE = Threshold("share", 0.05, "share", "share of the steady run spent evaluating")


@rule(
    id="eval-stall",
    title="Eval stall",
    family="stalls",
    needs=("steps",),
    or_from=FROM_STACKS,
    claims=("eval",),
    thresholds=(SHARE, HANDOVER),
    settings=frameworks.settings("eval_every", "eval_size", "eval_batch", "eval_workers"),
)
def check(m: Metrics) -> Finding | None:
    led = m.ledger
    if led is None or m.activity.window is None:
        return None
    inside = list(m.activity.evals_in_window)
    share = led.share("eval")
    if not inside or share < SHARE.value:
        return None
    cost = led.get("eval")
    switched = all(e.how == "mode" for e in inside)
    # attach reads stacks only: a model.eval() call is too quick to be seen, so its absence
    # is no evidence (the zoo's eval_stall calls it, and attach advised calling it)
    unseen = "" if not m.basis.by_stacks else "; model.eval() cannot be seen from outside"
    how = (
        "model.eval() … model.train()"
        if switched
        else "forward passes with no backward between steps"
        + (unseen or "; no model.eval() was seen")
        if any(e.how == "forward" for e in inside)
        else "another DataLoader iterated between steps; no model.eval() was seen"
    )
    cs = site(m, [(e.t0, e.t1) for e in inside])
    evidence = [
        f"{plural(len(inside), 'evaluation')} ({how}), {ms(cost / len(inside))} each, "
        f"{interval(m, inside)}",
        f"{cost:.2f} s in all, {share:.0%} of {m.basis.of}",
    ]
    if cs is not None:
        evidence.append(cs.sentence)
    fix = [
        "evaluate less often, or on a fixed subset of the validation set",
        "use a larger eval batch size and torch.inference_mode() instead of torch.no_grad()",
    ]
    slow = _slow_val_batches(m)
    if slow is not None:
        fix.append(
            "give the validation DataLoader workers (num_workers, persistent_workers=True): "
            f"the loop makes each of its batches in {ms(slow)}"
        )
    if not switched and not unseen:
        fix.insert(
            0,
            "call model.eval() before validating and model.train() after: without it dropout "
            "and batch norm run in training mode, so the validation numbers are wrong",
        )
    return Finding(
        id="eval-stall",
        severity="warning",
        title=f"Evaluation between steps takes {share:.0%} of the run",
        evidence=tuple(evidence),
        fix=tuple(fix),
        where=cs.where if cs else None,
        hotspot=cs.hot_where if cs else None,
    )


def _slow_val_batches(m: Metrics) -> float | None:
    """What a batch of a validation loader without workers costs the loop to make, where
    workers would take off more than receiving a batch from them is likely to cost (``HANDOVER``);
    None where there is no such loader (a loop that feeds its model by hand, as nanoGPT's
    get_batch does, has none to give workers) or its batches are cheap."""
    if not frameworks.uses_dataloader(m.activity.framework):
        return None
    for loader in m.loaders[1:]:  # the training loader is the first
        if not (loader.config.get("num_workers") or 0):
            made = main_batch_s(loader)
            if made is not None and made >= HANDOVER.value:
                return made
    return None
