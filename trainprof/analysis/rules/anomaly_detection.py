"""Anomaly detection left on: autograd's anomaly detection runs while the model trains.

``torch.autograd.set_detect_anomaly(True)`` (or a ``detect_anomaly()`` block around the loop,
or Lightning's ``Trainer(detect_anomaly=True)``) is a debugging aid: autograd keeps the Python
stack of every op of the forward pass, formatted as text, so that an error in the backward pass
can name the forward line behind it, and checks every gradient the backward pass makes for NaN.
A 7-layer MLP's step (batch 32, CPU) took 3.7× as long with it on here; on a GPU each NaN check
waits for the device. Left on after the bug it was for, it slows every step, with one warning
at start-up.

The stack keeping is measured (stack samples in ``torch.fx.traceback.format_stack`` called from
autograd's C++, its own ledger bucket); the NaN checks run in C++ inside the backward pass and
are not measured apart.

Anti-pattern::

    torch.autograd.set_detect_anomaly(True)   # added to find a NaN, never taken out
    for x, y in loader:
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()

Best practice::

    for step, (x, y) in enumerate(loader):
        loss = loss_fn(model(x), y)
        if step % 100 == 0 and not torch.isfinite(loss):   # one check every 100 steps
            raise FloatingPointError(f"loss is {loss.item()} at step {step}")
        loss.backward()
        optimizer.step()
"""

from __future__ import annotations

from trainprof.analysis.attribution import where
from trainprof.analysis.debug_modes import how_long
from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules.registry import FROM_STACKS, Threshold, rule

ON = Threshold("on", 0.5, "share", "anomaly detection was on for at least this share of the run")
SEEN = Threshold(
    "seen",
    0.02,
    "share",
    "from stack samples alone: the main thread kept op stacks at least this share of the time",
)
MEASURED = "stack samples in torch.fx.traceback.format_stack"
FIX = (
    "take torch.autograd.set_detect_anomaly(True) (or the detect_anomaly() block) out of "
    "training: turn it on only to find where a NaN comes from, for the steps that show it",
    "to catch a NaN while training, check the loss every N steps "
    "(if not torch.isfinite(loss): ...): one sync per N steps, not a check per op",
)


@rule(
    id="anomaly-detection",
    examples=("anomaly_detection",),
    title="Anomaly detection left on",
    family="host",
    harm="debug",
    costs="host",
    needs=("steps", "debug"),
    or_from=FROM_STACKS,
    claims=("anomaly",),
    thresholds=(ON, SEEN),
    settings={"lightning": "Trainer(detect_anomaly=False), the default"},
)
def check(m: Metrics) -> Finding | None:
    if m.basis.by_stacks:
        return _from_stacks(m)
    debug, window = m.activity.debug, m.activity.window
    if debug is None or window is None:
        return None
    on = debug.anomaly_share(*window)
    if on < ON.value:
        return None
    led = m.ledger
    split = led is not None and led.step_split == "stack samples"
    kept = led.share("anomaly") if led is not None and split else None
    when = how_long(on)
    evidence = [
        f"torch.autograd's anomaly detection was on for {when}: autograd keeps the Python "
        "stack of every op of the forward pass"
        + (" and checks every gradient of the backward pass for NaN" if debug.checks_nan() else ""),
        f"keeping those stacks took {kept:.0%} of the steady time ({MEASURED})"
        if kept is not None
        else "what the stacks cost is not measured: "
        + (m.activity.stacks_error or "no stack samples"),
    ]
    if debug.checks_nan():
        evidence.append(
            "the NaN checks run in C++ inside the backward pass and are not measured apart"
            + ("; on a GPU each check waits for the device" if m.on_cuda else "")
        )
    return finding(kept, evidence, where(debug.anomaly_at))


def finding(kept: float | None, evidence: list[str], at: str | None) -> Finding:
    """The finding, from the share of time spent keeping stacks (None: not measured)."""
    title = (
        f"Anomaly detection is on: keeping a stack for every op takes {kept:.0%} of the "
        "training time"
        if kept is not None and kept >= 0.01
        else "Anomaly detection is left on while the model trains"
    )
    return Finding(
        id="anomaly-detection",
        severity="warning",
        title=title,
        evidence=tuple(evidence),
        fix=FIX,
        where=at,
        # without stack samples the step was not split: its cost is not measured, not 0
        wants=() if kept is not None else (("anomaly", 0.0),),
    )


def _from_stacks(m: Metrics) -> Finding | None:
    """Only autograd's anomaly detection keeps a stack for each op: stacks that do say it is
    on (where it was turned on, and whether it checks for NaN, are the probe's to read)."""
    led = m.ledger
    assert led is not None
    kept = led.share("anomaly")
    if kept < SEEN.value:
        return None
    evidence = [
        f"the main thread kept the Python stack of an op {kept:.0%} of the time "
        f"({MEASURED}; {m.basis.sampled}): autograd does that only with anomaly detection on",
        "it likely also checks every gradient of the backward pass for NaN (the default), in "
        "C++, not measured apart",
    ]
    return finding(kept, evidence, None)
