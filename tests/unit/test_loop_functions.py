"""Which functions are the training loop, for "where": the probe reads the stack that steps the
optimizer once, so a loop whose steps sampling missed is still known. A clean-clone CI run
named ``main → train_one_epoch()`` for the blocking-upload zoo case's stalls: its 100 steps of a
few ms gave py-spy no backward sample outside the stalls, and ``main`` counted as a loop
function only because constructing the optimizer there imported torch._dynamo."""

from __future__ import annotations

import json

from synth import session

from trainprof.analysis.pipeline import analyze
from trainprof.store.events import ProcessLog
from trainprof.store.schema import INFO
from trainprof.store.stacks import StackSpan

TRAIN = "/home/user/proj/train.py"
TORCH_OPT = "/venv/site-packages/torch/optim/optimizer.py"
SOCKET = "/usr/lib/python3.11/socket.py"
MAIN = ("main", TRAIN, 125)
EPOCH = ("train_one_epoch", TRAIN, 98)
# Building the optimizer in main imports torch._dynamo: "optimizer" stacks before the loop.
BUILD_OPTIMIZER = (
    ("<module>", TRAIN, 133),
    ("main", TRAIN, 121),
    ("Adam.__init__", TORCH_OPT, 40),
    ("_find_and_load", "<frozen importlib._bootstrap>", 1),
)
UPLOAD = (
    ("<module>", TRAIN, 133),
    MAIN,
    EPOCH,
    ("TrackingClient.log_metrics", TRAIN, 57),
    ("SocketIO.readinto", SOCKET, 706),
)
FORWARD = (("<module>", TRAIN, 133), MAIN, ("train_one_epoch", TRAIN, 91))
STEP_CALLERS = [
    ["_on_optimizer_step", "/site-packages/trainprof/probe/torch_hooks.py"],
    ["Optimizer.profile_hook_step.<locals>.wrapper", TORCH_OPT],
    ["train_one_epoch", TRAIN],
    ["main", TRAIN],
    ["<module>", TRAIN],
]


def _job(step_callers: list[list[str]] | None) -> ProcessLog:
    """100 steps of 10 ms; every 10th also waits 250 ms on an upload. Sampled at 50 Hz: the
    optimizer's construction, forward passes, and the uploads; no backward outside stalls."""
    log = ProcessLog({"pid": 1000, "role": "main", "t0": 100.0, "version": 1})
    t_us, spans = (
        0,
        [StackSpan(100.0 + i * 0.02, 100.02 + i * 0.02, BUILD_OPTIMIZER) for i in range(50)],
    )
    for i in range(100):
        dur = 260_000 if i % 10 == 9 else 10_000
        spans.append(StackSpan(102.0 + t_us / 1e6, 102.0 + (t_us + 10_000) / 1e6, FORWARD))
        if dur > 10_000:
            spans.append(StackSpan(102.01 + t_us / 1e6, 102.0 + (t_us + dur) / 1e6, UPLOAD))
        t_us += dur
        log.add_line(f"S {2_000_000 + t_us} {dur} 0 0 32 1 32")
    if step_callers is not None:
        log.add_line(f"{INFO} {json.dumps({'t': 2_010_000, 'step_callers': step_callers})}")
    log.torch_imported_us = 1000
    sess = session(log)
    sess.spans = spans
    return sess


def _stall_where(step_callers: list[list[str]] | None) -> str | None:
    _m, verdict = analyze(_job(step_callers))
    stall = next(f for f in verdict.findings if f.id.endswith("-stall"))
    return stall.where


def test_the_loop_is_the_function_that_stepped_the_optimizer() -> None:
    where = _stall_where(STEP_CALLERS)
    assert where is not None and "train_one_epoch → log_metrics()" in where, where


def test_the_job_reproduces_the_misnamed_loop_without_the_probes_record() -> None:
    """Stacks alone (a run directory from before the record) name the CI run's wrong line: the
    test above would pass without the record otherwise."""
    where = _stall_where(None)
    assert where is not None and "main → train_one_epoch()" in where, where
