"""Recompiles: torch.compile compiles the model again and again while it trains, and may give
up on it.

A compiled function keeps its graphs with guards on what they were traced for: each input's
shape (under ``dynamic=False``, or a dimension Dynamo has not yet seen change), Python numbers
passed in, flags the code branches on. A call that fails every guard compiles a new graph,
holding the loop as long as a first compile; after ``torch._dynamo.config.recompile_limit``
(8) graphs Dynamo gives up on the function and runs it uncompiled, as eager PyTorch, for the
rest of the run, with one warning on stderr ("hit config.recompile_limit"). The usual cause
is a batch padded to its longest sequence: a new length every step. The probe times each
compile from Dynamo's own compile callbacks and reads Dynamo's reason for each recompile.

Anti-pattern::

    model = torch.compile(model, dynamic=False)
    loader = DataLoader(texts, batch_size=16, collate_fn=pad_to_longest)
    for tokens, labels in loader:          # tokens: (16, longest in this batch)
        loss = loss_fn(model(tokens), labels)

Best practice::

    def pad_to_bucket(batch):              # a few fixed lengths: one graph each
        n = -(-max(len(t) for t, _ in batch) // 64) * 64
        ...
    # or one graph for every length:
    torch._dynamo.mark_dynamic(tokens, 1)  # before the call, or torch.compile(dynamic=True)
"""

from __future__ import annotations

import re
from collections import Counter

from trainprof.analysis.attribution import where
from trainprof.analysis.compiles import SIZE_MISMATCH, Compile, CompileLog, traced
from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._common import ms
from trainprof.analysis.rules.registry import Threshold, rule
from trainprof.units import fmt_duration, plural

MIN_COMPILES = Threshold("min_compiles", 2, "count", "graphs compiled after warm-up, at least")
SHARE = Threshold("share", 0.05, "share", "their compile time, of the steady run")
LIMIT_DOC = "torch._dynamo.config.recompile_limit"
ARG = re.compile(r"args\[(\d+)\]")


@rule(
    id="recompiles",
    examples=("recompiles",),
    title="torch.compile recompiles",
    family="host",
    needs=("steps", "compiles"),
    claims=("compile",),
    thresholds=(MIN_COMPILES, SHARE),
)
def check(m: Metrics) -> Finding | None:
    log, window, led = m.activity.compiles, m.activity.window, m.ledger
    if log is None or window is None or led is None:
        return None
    steady = log.within(*window)
    graphs = traced(steady)
    gave_up = log.gave_up
    share = led.share("compile")
    if gave_up is None and (len(graphs) < MIN_COMPILES.value or share < SHARE.value):
        return None
    total = traced(log.compiles)
    steady_s = sum(c.seconds for c in steady)
    typical = _typical(graphs or total)
    timed = f"each took {typical}, timed in the job by torch.compile's compile callbacks"
    if graphs:
        first = (
            f"{plural(len(graphs), 'graph')} compiled after warm-up ({len(total)} in all), "
            f"{fmt_duration(steady_s)} of the steady run ({share:.0%}); {timed}"
        )
    else:
        first = (
            f"{plural(len(total), 'graph')} compiled, all during warm-up "
            f"({fmt_duration(log.seconds_before(window[0]))}); {timed}"
        )
    evidence = [first]
    reason = (gave_up.reason if gave_up else None) or _last_reason(log)
    if reason:
        evidence.append(f"Dynamo's reason for recompiling: {_reason_text(reason)}")
    if gave_up is not None:
        evidence.append(
            f"Dynamo gave up at its recompile limit ({LIMIT_DOC}): from then on the compiled "
            "code ran uncompiled, as eager PyTorch, for the rest of the run (what that costs "
            "a step was not measured: no step ran compiled to compare)"
        )
    title = (
        f"torch.compile gave up on the model after compiling {plural(len(total), 'graph')}: "
        "it runs uncompiled"
        if gave_up is not None
        else f"torch.compile recompiles while training ({plural(len(graphs), 'graph')} after "
        f"warm-up, {fmt_duration(steady_s)})"
    )
    fixes = _fixes(reason)
    if gave_up is not None:
        fixes.append(f"raising {LIMIT_DOC} only buys more compiles; fix what changes instead")
    return Finding(
        id="recompiles",
        severity="warning",
        title=title,
        evidence=tuple(evidence),
        fix=tuple(fixes),
        where=where(_call_site(graphs or total)),
        # the steady run's compile time, where there was any; none measured is no impact, not 0
        wants=(("compile", 1.0 if steady_s > 0 else 0.0),),
    )


def _typical(compiles: list[Compile]) -> str:
    seconds = sorted(c.seconds for c in compiles)
    return ms(seconds[len(seconds) // 2]) if seconds else "an unknown time"


def _last_reason(log: CompileLog) -> str | None:
    return next((r.reason for r in reversed(log.recompiles) if r.reason), None)


def _reason_text(reason: str) -> str:
    """Dynamo's words ("0/3: tensor 'x' size mismatch at index 1. expected 60, actual 56"), read
    out where it is a shape."""
    found = SIZE_MISMATCH.search(reason)
    if found is None:
        return reason.split(": ", 1)[-1] if reason[:1].isdigit() else reason
    dim = int(found["dim"])
    what = "its batch size" if dim == 0 else f"its dimension {dim}"
    return (
        f"{_input(found['name'])} changed shape: {what} was {found['expected']} when "
        f"compiled, {found['actual']} at this call"
    )


def _input(name: str) -> str:
    """Dynamo's name of an input: the parameter's (``x``), or ``args[0]`` through a wrapper."""
    if (n := ARG.fullmatch(name)) is not None:
        return f"the compiled model's input {int(n[1]) + 1}"
    return f"its input {name}"


def _code_name(name: str) -> str:
    return name if name.isidentifier() else "x"


def _fixes(reason: str | None) -> list[str]:
    found = SIZE_MISMATCH.search(reason or "")
    if found is None:
        return [
            "keep what Dynamo guards on the same from step to step: pass a number that changes "
            "each step as a tensor (torch.tensor(value)) rather than a Python float or int, and "
            "do not switch modules or flags between calls",
            'TORCH_LOGS="recompiles" prints the guard that failed at each recompile',
        ]
    name, dim = _code_name(found["name"]), int(found["dim"])
    if dim == 0:
        return [
            "drop the short last batch: DataLoader(..., drop_last=True)",
            f"or compile one graph for every batch size: torch._dynamo.mark_dynamic({name}, 0) "
            "before the call, or torch.compile(model, dynamic=True)",
        ]
    return [
        f"pad dimension {dim} to a few fixed lengths (round it up to a multiple of 64 in the "
        "collate_fn): one graph per length",
        f"or compile one graph for every length: torch._dynamo.mark_dynamic({name}, {dim}) "
        "before the call, or torch.compile(model, dynamic=True)",
    ]


def _call_site(compiles: list[Compile]) -> tuple[str, str, int] | None:
    """The job's line most of the compiles ran under (the call of the compiled model)."""
    sites = Counter(c.where for c in compiles if c.where is not None)
    return sites.most_common(1)[0][0] if sites else None
