"""Fake batching: many DataLoader batches of one sample per optimizer step.

The loader yields one sample at a time and a Python loop accumulates gradients over them, so
every sample pays its own iteration, collate and forward/backward launch (seed 000: 130×).

Anti-pattern::

    loader = DataLoader(dataset, batch_size=1)
    for _ in range(accumulate):
        x, y = next(it)
        loss_fn(model(x), y).backward()
    optimizer.step()

Best practice::

    loader = DataLoader(dataset, batch_size=64, collate_fn=pad_collate)
    for x, y in loader:
        loss_fn(model(x), y).backward()
        optimizer.step()
"""

from __future__ import annotations

from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import LoaderView, Metrics
from trainprof.analysis.rules._common import STEP_BUCKETS, loader_caller, primary_loader
from trainprof.analysis.rules.registry import Fix, Threshold, rule

MIN_FETCHES = Threshold(
    "min_fetches", 2, "count", "DataLoader fetches of batch size 1 per optimizer step"
)


# One batch of the k samples a step now takes one by one: the optimizer sees the same samples
# per update, so the number of updates and the learning rate stay as they are.
ONE_BATCH = Fix(
    "one batch per step",
    r"batch_size|accumulat",
    device="any",
    modules="any",
    changes="code",
)


@rule(
    id="fake-batching",
    examples=("fake_batching",),
    title="Fake batching",
    fixes=(ONE_BATCH,),
    family="input",
    needs=("steps", "loader"),
    claims=STEP_BUCKETS,
    thresholds=(MIN_FETCHES,),
    settings={
        "transformers": "a larger per_device_train_batch_size and a smaller "
        "gradient_accumulation_steps in TrainingArguments (their product is the batch the "
        "optimizer sees)",
        "lightning": "a larger DataLoader batch_size and a smaller "
        "Trainer(accumulate_grad_batches=...)",
    },
    compounds={
        "input-bound": (
            "each of a step's small batches pays the DataLoader's cost per batch (its fetch, "
            "collate and hand-over) with the loop waiting: one batch of the same samples pays "
            "it once, so fixing the batching also cuts the wait for data"
        ),
    },
)
def check(m: Metrics) -> Finding | None:
    s = m.steady
    loader = primary_loader(m)
    assert s is not None
    configured = loader.config.get("batch_size") if loader else None
    batch_one = s.batch_size == 1 or configured == 1
    if m.unit != "step" or not batch_one or s.fetches_per_step < MIN_FETCHES.value:
        return None
    k = s.fetches_per_step
    return Finding(
        id="fake-batching",
        severity="warning",
        title=f"Fake batching: {k:.0f} batches of 1 per optimizer step instead of one batch of {k:.0f}",
        evidence=(
            f"{k:.0f} DataLoader fetches per optimizer step, each a batch of 1 ({_made_by(loader)})",
            f"{s.steps_per_s:.2f} optimizer steps/s = {s.steps_per_s * k:.1f} samples/s",
            "each sample goes through its own Python iteration, collate and forward pass, "
            f"so the per-sample overhead is paid {k:.0f}× per step",
        ),
        fix=(
            f"DataLoader(dataset, batch_size={k:.0f}, ...) and one forward/backward per step "
            "instead of a Python loop of next(loader) per sample",
            "if samples differ in length, pad them in a collate_fn "
            "(torch.nn.utils.rnn.pad_sequence) or bucket by length",
            "keep gradient accumulation only for batches larger than memory allows",
        ),
        # What batching saves: all but one of the k per-sample passes through the step.
        wants=tuple((b, 1.0 - 1.0 / k) for b in STEP_BUCKETS),
        where=loader_caller(m),
    )


def _made_by(loader: LoaderView | None) -> str:
    """What sets the batch size: the DataLoader's batch_size, or its batch_sampler (a
    framework's loader passes one, and batch_size is then None)."""
    cfg = loader.config if loader else {}
    if cfg.get("batch_size") is None and cfg.get("batch_sampler"):
        return f"from its batch_sampler, {str(cfg['batch_sampler']).rsplit('.', 1)[-1]}"
    return f"DataLoader batch_size={cfg.get('batch_size')}"
