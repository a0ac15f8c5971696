"""Which DataLoader feeds training: the one whose batches the steps take, never a loader
iterated before the first optimizer step and left (Lightning's sanity-check validation runs
its loader first)."""

from __future__ import annotations

import json
from typing import Any

from synth import DEFAULT_LOADER, process, session

from trainprof.analysis.loaders import (
    epoch_first_steps,
    num_workers,
    training_loader_key,
    training_loader_keys,
)
from trainprof.analysis.measure import measure
from trainprof.analysis.pipeline import analyze
from trainprof.store.events import ProcessLog
from trainprof.store.stacks import StackSpan

VAL = {**DEFAULT_LOADER, "batch_size": 64, "num_workers": 0, "persistent_workers": False}
TRAIN = {**DEFAULT_LOADER, "batch_size": 32, "num_workers": 2}


def _log(loaders: list[tuple[dict[str, Any], int]], batch: int = 32) -> ProcessLog:
    """100 steps of 0.1 s after a first of 2 s (ending 2 s in); ``loaders`` in the order they
    start a pass, each with when (µs from t0) it starts one."""
    log = process(100, step_s=0.1, wait_s=0.05, batch_size=batch, loader=None)
    for key, (cfg, t_iter) in enumerate(loaders):
        log.add_line(f"L {key} {json.dumps(cfg)}")
        log.add_line(f"E {key} {t_iter} 1000")
    return log


def test_a_sanity_check_loader_run_first_is_not_the_training_loader() -> None:
    log = _log([(VAL, 100_000), (TRAIN, 300_000)])
    log.add_line("E 0 5000000 1000")  # later validations: after the first step
    assert training_loader_key(log) == 1
    assert num_workers(log) == 2
    m = measure(session(log))
    assert m.loaders[0].config["num_workers"] == 2
    assert [v.config["batch_size"] for v in m.loaders] == [32, 64]


def test_the_steps_batch_size_names_it_whichever_started_last() -> None:
    """A validation pass begun after the training iterator was made (a peek, a baseline
    evaluation) is still not the loader whose batches the steps take."""
    log = _log([(TRAIN, 100_000), (VAL, 300_000)])
    assert training_loader_key(log) == 0
    assert num_workers(log) == 2


def test_with_equal_batch_sizes_the_last_pass_before_the_first_step_decides() -> None:
    same = {**VAL, "batch_size": 32}
    assert training_loader_key(_log([(same, 100_000), (TRAIN, 300_000)])) == 1
    # a pass begun after the first step (a validation) is never the training loader's
    assert training_loader_key(_log([(TRAIN, 100_000), (same, 2_500_000)])) == 0


def test_a_batch_size_no_loader_has_falls_back_to_timing() -> None:
    log = _log([(VAL, 100_000), (TRAIN, 300_000)], batch=7)
    assert training_loader_key(log) == 1


def test_without_passes_recorded_the_first_loader_created_is_it() -> None:
    log = process(100, loader=None)
    log.add_line(f"L 0 {json.dumps(TRAIN)}")
    log.add_line(f"L 1 {json.dumps(VAL)}")
    assert training_loader_key(log) == 0


def test_worker_start_up_is_counted_on_the_training_loaders_passes() -> None:
    """The first num_workers steps after each of its passes, not after a validation's."""
    log = _log([(VAL, 100_000), (TRAIN, 300_000)])
    log.add_line("E 1 6000000 1000")  # a second epoch, 6 s in: after step 40
    log.add_line("E 0 7000000 1000")  # a validation: its first steps are not start-up
    firsts = epoch_first_steps(log)
    assert firsts == [0, 1, 41, 42], firsts


def _rebuilt_each_epoch(persistent: bool = False) -> ProcessLog:
    """A loop that builds its training DataLoader anew each epoch over one dataset object (keys
    1-3, the same ``dataset_id``), beside a validation loader over another dataset (key 0)."""
    train = {**TRAIN, "dataset_id": 7, "persistent_workers": persistent}
    val = {**VAL, "dataset_id": 8}
    log = _log([(val, 100_000), (train, 300_000)])
    for key, t_s in ((2, 4), (3, 7)):  # after steps 20 and 50
        log.add_line(f"L {key} {json.dumps(train)}")
        log.add_line(f"E {key} {t_s * 1_000_000} 1800000")
    return log


def test_a_loader_built_anew_over_the_same_dataset_is_the_training_loader() -> None:
    log = _rebuilt_each_epoch()
    assert training_loader_keys(log) == {1, 2, 3}
    assert epoch_first_steps(log) == [0, 1, 21, 22, 51, 52]
    m = measure(session(log))
    assert [v.config["batch_size"] for v in m.loaders] == [32, 64]  # one training loader
    assert m.loaders[0].built == 3 and len(m.loaders[0].first_batch_waits_s) == 3
    assert m.loaders[1].built == 1


def test_without_the_dataset_identity_each_loader_is_its_own() -> None:
    """A run recorded before the probe kept ``dataset_id``."""
    log = _log([(VAL, 100_000), (TRAIN, 300_000), (TRAIN, 4_000_000)])
    assert training_loader_keys(log) == {1}


def test_a_loader_rebuilt_each_epoch_is_told_to_build_it_once_persistent_or_not() -> None:
    for persistent in (False, True):
        sess = session(_rebuilt_each_epoch(persistent))
        found = [f for f in analyze(sess)[1].findings if f.id == "worker-startup"]
        assert found, persistent
        assert (
            "a new DataLoader over the same dataset every epoch (3 built)" in found[0].evidence[1]
        )
        assert found[0].fix[0].startswith("build the DataLoader once, before the epoch loop")


def test_worker_start_up_is_placed_where_the_loop_starts_each_pass() -> None:
    log = _rebuilt_each_epoch()
    train = "/home/u/train.py"
    # the frames that called the optimizer step, innermost first: the loop's functions
    callers = [["Trainer.train_epoch", train], ["<module>", train]]
    log.infos.append({"t": 1, "step_callers": callers})
    sess = session(log)
    at_iter = (
        ("<module>", train, 200),
        ("Trainer.train_epoch", train, 109),
        ("DataLoader.__iter__", "/venv/site-packages/torch/utils/data/dataloader.py", 491),
    )
    sess.spans = [StackSpan(log.t0 + t_s, log.t0 + t_s + 1.8, at_iter) for t_s in (0.3, 4.0, 7.0)]
    found = [f for f in analyze(sess)[1].findings if f.id == "worker-startup"]
    assert found and found[0].where is not None
    assert found[0].where == "/home/u/train.py:109 (train_epoch)"
