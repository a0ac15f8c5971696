"""The likeliest holder of a memory growth: a line adding to a container that outlives its call."""

from __future__ import annotations

from pathlib import Path

from trainprof.analysis.holders import busiest_functions, holders, likeliest
from trainprof.store.stacks import StackSpan

SOURCE = """\
import torch

HISTORY = []


class Tracker:
    def __init__(self):
        self.scores = []
        self.cache = {}

    def update(self, scores, key):
        self.seen = 1
        self.scores.append(scores.detach())
        self.cache[key] = scores
        self.cache[key] = 0
        self.losses.append(scores.sum().item())


def step(batch, log):
    parts = []
    parts.append(batch * 2)
    log.append(batch)
    HISTORY.append({"loss": float(batch.sum())})
    return torch.cat(parts)


def train(tracker, data):
    for i, x in enumerate(data):
        out = step(x, [])
        tracker.update(out, i)
"""


def _file(tmp_path: Path) -> str:
    path = tmp_path / "train.py"
    path.write_text(SOURCE)
    return str(path)


def test_lines_that_keep_what_the_call_made_are_holders(tmp_path: Path) -> None:
    path = _file(tmp_path)
    kept = [(h.line, h.text) for h in holders(path, "Tracker.update", 12)]
    assert kept == [
        (13, "self.scores.append(scores.detach())"),
        (14, "self.cache[key] = scores"),
    ]  # not a constant stored, nor a number appended
    assert [h.text for h in holders(path, "step", 20)] == ["log.append(batch)"]  # a list passed in


def test_no_holder_where_the_function_keeps_nothing(tmp_path: Path) -> None:
    path = _file(tmp_path)
    assert holders(path, "train", 28) == []
    assert holders(path, "missing", 28) == []
    assert holders(str(tmp_path / "gone.py"), "train", 28) == []


def test_a_holder_in_a_function_the_loop_calls_is_found_by_its_name(tmp_path: Path) -> None:
    path = _file(tmp_path)
    found = likeliest([("train", path, 28)])  # the loop alone ran while sampled
    assert found is not None
    assert found.where == f"{path}:13 (Tracker.update)"


def test_helpers_are_searched_before_the_functions_that_drive_training(tmp_path: Path) -> None:
    path = _file(tmp_path)
    loop = ("<module>", path, 33), ("train", path, 29)
    spans = [
        StackSpan(0.0, 0.5, loop),
        StackSpan(0.5, 0.6, (*loop, ("step", path, 21))),
    ]
    drive = frozenset({("<module>", path), ("train", path)})  # ancestors of backward
    ranked = busiest_functions(spans, (0.0, 1.0), drive)
    assert [name for name, _p, _l in ranked] == ["step", "<module>", "train"]
    found = likeliest(ranked)
    assert found is not None and found.function == "step" and found.line == 22


METER = """\
class AverageMeter:
    def update(self, val, n=1):
        self.sum = self.sum + val * n
        self.count += n
        self.steps += 1


class Logger:
    def log(self, loss):
        self.lines.append(loss)


def train_step(meter, logger, loss):
    meter.update(loss)
    logger.log(loss)
"""


def test_a_sum_kept_across_calls_holds_only_where_nothing_is_added(tmp_path: Path) -> None:
    """A loss tensor summed into an attribute keeps every step's graph: the holder where no line
    adds to a container (blind set B's aux_head_meter); a container's add is likelier."""
    path = tmp_path / "meter.py"
    path.write_text(METER)
    sums = holders(str(path), "AverageMeter.update", 3)
    assert [(h.line, h.adds) for h in sums] == [(3, False), (4, False)]  # not += 1
    found = likeliest([("train_step", str(path), 14)])
    assert found is not None and found.function == "Logger.log"
    printed = tmp_path / "printed.py"
    printed.write_text(METER.replace("self.lines.append(loss)", "print(loss)"))
    only_sum = likeliest([("train_step", str(printed), 14)])
    assert only_sum is not None
    assert (only_sum.function, only_sum.line) == ("AverageMeter.update", 3)


LOOP_HISTORY = """\
def train(model, data):
    history, seen = [], []
    for x in data:
        pred = model(x)
        history.append((pred.tolist(), x.tolist()))
        batch = []
        batch.append(pred)
    return history
"""


def test_a_list_the_training_loop_grows_from_before_its_loop_is_held(tmp_path: Path) -> None:
    """The loop's function keeps what it appends to a list made before the loop (each step's
    predictions as Python lists: .tolist() is no scalar); a list made inside the loop is not
    kept, and a helper's own list is not either."""
    path = tmp_path / "loop.py"
    path.write_text(LOOP_HISTORY)
    assert [h.text for h in holders(str(path), "train", 3, loop=True)] == [
        "history.append((pred.tolist(), x.tolist()))"
    ]
    assert holders(str(path), "train", 3) == []  # a helper's list, returned: not kept
    found = likeliest([("train", str(path), 3)], frozenset({("train", str(path))}))
    assert found is not None and found.line == 5
