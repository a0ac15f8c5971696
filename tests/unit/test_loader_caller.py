"""Where the loop pulls batches: the user's line that calls into the DataLoader, from the
steady window's stacks, or the whole run's when no steady sample landed in the loader."""

from __future__ import annotations

from synth import process, session

from trainprof.analysis.pipeline import analyze
from trainprof.analysis.rules._common import loader_caller
from trainprof.store.stacks import StackSpan

TRAIN = "/home/user/proj/train.py"
PULL = (
    ("<module>", TRAIN, 1),
    ("main", TRAIN, 40),
    ("__next__", "/venv/site-packages/torch/utils/data/dataloader.py", 1),
)
MODEL = (
    ("<module>", TRAIN, 1),
    ("main", TRAIN, 44),
    ("Module._call_impl", "/venv/site-packages/torch/nn/modules/module.py", 1),
)


def test_the_loader_line_comes_from_the_whole_run_when_the_window_has_none() -> None:
    s = session(process(100))
    m, _v = analyze(s)
    assert m.activity.window is not None
    w0, w1 = m.activity.window
    s.spans = [StackSpan(w0 - 0.5, w0 - 0.4, PULL), StackSpan(w0, w1, MODEL)]
    m, _v = analyze(s)
    assert loader_caller(m) == f"{TRAIN}:40 (main)"


def test_importing_torch_is_not_pulling_batches() -> None:
    """`import torch` runs torch/utils/data's module code under the user's line 2: a job
    whose loader a framework iterates (no user line of its own) was told to look at line 2."""
    importing = (
        ("<module>", TRAIN, 2),
        ("_find_and_load", "<frozen importlib._bootstrap>", 1176),
        ("<module>", "/venv/site-packages/torch/utils/data/dataloader.py", 1),
    )
    s = session(process(100))
    m, _v = analyze(s)
    assert m.activity.window is not None
    w0, w1 = m.activity.window
    s.spans = [StackSpan(90.0, 91.0, importing), StackSpan(w0, w1, MODEL)]
    assert loader_caller(analyze(s)[0]) is None
    s.spans = [StackSpan(90.0, 91.0, importing), StackSpan(w0 - 0.5, w0 - 0.4, PULL)]
    assert loader_caller(analyze(s)[0]) == f"{TRAIN}:40 (main)"
