"""Eval stall: evaluation between training steps takes a large share of the run.

Recognised by a top-level ``model.eval()`` … ``model.train()`` switch, or, without one, by a
stall in which the main thread ran forward passes and no backward (validation under
``torch.no_grad()`` alone) or iterated another DataLoader. Evaluating at most once per epoch
under ``per_epoch_note`` of the run is normal practice: a note, not a warning.

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
PER_EPOCH = Threshold(
    "per_epoch_note",
    0.10,
    "share",
    "evaluating at most once per epoch, a share below this is a note, not a warning (normal "
    "practice: the MNIST example's test pass after each epoch)",
)


@rule(
    id="eval-stall",
    examples=("eval_stall", "eval_no_grad"),
    title="Eval stall",
    family="stalls",
    needs=("steps",),
    or_from=FROM_STACKS,
    claims=("eval",),
    thresholds=(SHARE, PER_EPOCH, HANDOVER),
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
    epochs = _once_per_epoch(m, len(inside))
    note = epochs is not None and share < PER_EPOCH.value
    if note:
        evidence.append(
            f"{epochs}: at most once per epoch, and under {PER_EPOCH}, is normal practice; "
            "a note, not a warning"
        )
    fix = [
        "evaluate less often, or on a fixed subset of the validation set",
        "use a larger eval batch size and torch.inference_mode() instead of torch.no_grad()",
    ]
    starts = _val_worker_starts(m, [(e.t0, e.t1) for e in inside])
    if starts is not None:
        evidence.append(starts[0])
        fix.insert(0 if starts[2] >= 0.5 else 1, starts[1])  # first where it is most of it
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
        severity="info" if note else "warning",
        title=f"Evaluation {'once per epoch' if note else 'between steps'} takes {share:.0%} "
        "of the run",
        evidence=tuple(evidence),
        fix=tuple(fix),
        where=cs.where if cs else None,
        hotspot=cs.hot_where if cs else None,
    )


# Share of the evaluations' time their loaders' workers starting must take to be said.
STARTS_SAID = 0.1


def _val_worker_starts(
    m: Metrics, evals: list[tuple[float, float]]
) -> tuple[str, str, float] | None:
    """(evidence, fix, share of their time) where the evaluations wait for a loader's workers to
    start (its first batch of each pass) for ``STARTS_SAID`` of their time or more; else None."""
    total = sum(e[1] - e[0] for e in evals)
    for v in m.loaders:  # the training loader too: its passes lie outside the evaluations
        workers = int(v.config.get("num_workers") or 0)
        if not workers or total <= 0:
            continue
        waits = [
            max(0.0, min(w1, e1) - max(w0, e0))
            for w0, w1 in v.first_batch_windows
            for e0, e1 in evals
        ]
        waited = sum(waits)
        passes = sum(1 for w in waits if w > 0)
        if not passes or waited < STARTS_SAID * total:
            continue
        why = (
            f"a new DataLoader each evaluation ({v.built} built)"
            if v.built > 1
            else "persistent_workers=False"
        )
        evidence = (
            f"{waited / total:.0%} of the evaluations' time waits for the validation loader's "
            f"first batch while its {plural(workers, 'worker')} start, {ms(waited / passes)} "
            f"each pass: {why}"
        )
        fix = (
            "build the validation DataLoader once, outside the evaluation, with "
            "persistent_workers=True, so its workers start once; or num_workers=0 for a small "
            "validation set, whose batches cost less than starting workers"
        )
        return evidence, fix, waited / total
    return None


def _slow_val_batches(m: Metrics) -> float | None:
    """What a batch of a validation loader without workers costs the loop to make, where
    workers would take off more than receiving a batch from them is likely to cost (``HANDOVER``);
    None where there is no such loader (a loop that feeds its model by hand, as nanoGPT's
    get_batch does, has none to give workers), its batches are cheap, or their time is not its
    own (the main process also made the training loader's batches)."""
    if not frameworks.uses_dataloader(m.activity.framework) or not m.loaders:
        return None
    in_main = [v for v in m.loaders if not (v.config.get("num_workers") or 0)]
    if len(in_main) != 1 or in_main[0] is m.loaders[0]:  # the training loader is the first
        return None
    made = main_batch_s(in_main[0])
    return made if made is not None and made >= HANDOVER.value else None


def _once_per_epoch(m: Metrics, count: int) -> str | None:
    """How the evaluations came at most once per epoch (a pass over the training loader), as
    evidence; None where they came more often or epochs were not seen. By the whole run's
    passes (a validation before training, a sanity check, may add one), else by the steady
    window's steps and the loader's length in batches."""
    if not m.loaders:
        return None
    train, s = m.loaders[0], m.steady
    passes, evals = len(train.first_batch_waits_s), len(m.activity.evals)
    if passes >= 2 and evals <= passes + 1:
        return f"{plural(evals, 'evaluation')} in {plural(passes, 'epoch')} of training"
    batches = train.config.get("len")
    if s is None or not isinstance(batches, int) or batches <= 0:
        return None
    steps = batches / max(s.fetches_per_step, 1.0)
    if count <= s.count / steps + 1:
        return (
            f"{plural(count, 'evaluation')} in {s.count} steady steps, an epoch being "
            f"{steps:.0f} steps"
        )
    return None
