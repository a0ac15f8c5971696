"""Fixes in the framework's own words: every framework trainprof recognises (the Hugging Face
Trainer, Lightning, nanoGPT, timm's train.py, a pytorch/examples-style script) gets its own
names for the knobs each rule's fix turns, and never a knob it does not have (nanoGPT has no
DataLoader to give workers)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from synth import DEFAULT_LOADER, session
from test_rule_thresholds import (
    checkpoint_stall,
    eval_stall,
    input_bound,
    logging_overhead,
    pageable_memory,
    worker_startup,
)

from trainprof.analysis import frameworks
from trainprof.analysis.findings import Finding
from trainprof.analysis.pipeline import analyze
from trainprof.store.schema import INFO
from trainprof.store.session import Session
from trainprof.store.stacks import StackSpan

SITE = "/venv/lib/python3.11/site-packages"

NANOGPT = """
import numpy as np
import torch
out_dir = 'out'
eval_interval = 2000
log_interval = 1
eval_iters = 200
always_save_checkpoint = True
batch_size = 12
def get_batch(split):
    data = np.memmap('train.bin', dtype=np.uint16, mode='r')
    return data
iter_num = 0
while True:
    if iter_num % eval_interval == 0:
        pass
    iter_num += 1
"""
TIMM = """
import argparse
import timm
from timm.data import create_loader
parser = argparse.ArgumentParser()
group = parser.add_argument_group('Miscellaneous parameters')
group.add_argument('-j', '--workers', type=int, default=4, metavar='N')
group.add_argument('--pin-mem', action='store_true', default=False)
group.add_argument('--val-interval', type=int, default=1, metavar='N')
"""
EXAMPLES = """
import argparse
parser = argparse.ArgumentParser(description='PyTorch ImageNet Training')
parser.add_argument('-j', '--workers', default=4, type=int, metavar='N')
parser.add_argument('-b', '--batch-size', default=256, type=int)
"""
# nanoGPT's names, but not all of them: a script of one's own
NEAR_MISS = "eval_interval = 10\nlog_interval = 1\nfor step in range(100):\n    pass\n"
SCRIPTS = {"nanogpt": NANOGPT, "timm": TIMM, "examples": EXAMPLES}
LOOPS = {
    "transformers": [
        ["Trainer._inner_training_loop", f"{SITE}/transformers/trainer.py"],
        ["Trainer.train", f"{SITE}/transformers/trainer.py"],
        ["<module>", "/home/u/train.py"],
    ],
    "lightning": [
        ["_AutomaticOptimization.run", f"{SITE}/lightning/pytorch/loops/optimization/auto.py"],
        ["_FitLoop.run", f"{SITE}/lightning/pytorch/loops/fit_loop.py"],
        ["<module>", "/home/u/train.py"],
    ],
}


def _script(tmp: Path, text: str) -> str:
    path = tmp / "train.py"
    path.write_text(text)
    return str(path)


def _run_by(sess: Session, framework: str, tmp: Path) -> Session:
    """The job as ``framework`` runs it: the frames that stepped the optimizer (the probe's
    ``step_callers``, innermost first) are its loop's, or the script's own module."""
    if framework in LOOPS:
        callers = LOOPS[framework]
    else:
        callers = [["main", "x"], ["<module>", _script(tmp, SCRIPTS[framework])]]
    sess.processes[0].add_line(f"{INFO} {json.dumps({'step_callers': callers})}")
    return sess


def _finding(sess: Session, rule: str) -> Finding:
    found = {f.id: f for f in analyze(sess)[1].findings}
    assert rule in found, sorted(found)
    return found[rule]


# rule → its builder at a value that fires, and each framework's words its fix must hold
WORDS: dict[str, tuple[Callable[[], Session], dict[str, tuple[str, ...]]]] = {
    "eval-stall": (
        lambda: eval_stall(0.06),
        {
            "transformers": ("eval_steps", "per_device_eval_batch_size"),
            "lightning": ("val_check_interval", "limit_val_batches", "check_val_every_n_epoch"),
            "nanogpt": ("eval_interval", "eval_iters"),
            "timm": ("--val-interval", "--validation-batch-size"),
        },
    ),
    "checkpoint-stall": (
        lambda: checkpoint_stall(0.2),
        {
            "transformers": ("save_steps", "save_total_limit"),
            "lightning": ("ModelCheckpoint(every_n_train_steps", "enable_checkpointing=False"),
            "nanogpt": ("always_save_checkpoint=False", "eval_interval"),
            "timm": ("--recovery-interval", "--checkpoint-hist"),
        },
    ),
    "logging-overhead": (
        lambda: logging_overhead(0.2),
        {
            "transformers": ("logging_steps",),
            "lightning": ("log_every_n_steps",),
            "nanogpt": ("log_interval",),
            "timm": ("--log-interval",),
        },
    ),
    "input-bound": (
        lambda: input_bound(0.5),
        {
            "transformers": ("dataloader_num_workers", "per_device_train_batch_size"),
            "lightning": ("train_dataloader()", "num_workers=", "batch_size="),
            # a CPU job: pinned memory is held back (it needs an accelerator)
            "timm": ("-j/--workers", "-b/--batch-size"),
            "examples": ("-j/--workers",),
        },
    ),
    "pageable-memory": (
        lambda: pageable_memory(0),
        {
            "transformers": ("dataloader_pin_memory",),
            "lightning": ("pin_memory=True", "train_dataloader()"),
            "timm": ("--pin-mem",),
        },
    ),
    "worker-startup": (
        lambda: worker_startup(0.06),
        {
            "transformers": ("dataloader_persistent_workers",),
            "lightning": ("persistent_workers=True", "train_dataloader()"),
        },
    ),
}
CASES = [(rule, fw, words) for rule, (_b, by_fw) in WORDS.items() for fw, words in by_fw.items()]


@pytest.mark.parametrize(("rule", "framework", "words"), CASES)
def test_a_finding_names_the_frameworks_own_setting(
    rule: str, framework: str, words: tuple[str, ...], tmp_path: Path
) -> None:
    build = WORDS[rule][0]
    own = _finding(_run_by(build(), framework, tmp_path), rule)
    line = next((f for f in own.fix if f.startswith(f"with {frameworks.NAMES[framework]}: ")), "")
    assert all(w in line for w in words), (line, own.fix)
    # the generic fix stays, in PyTorch's words, before it (but a DataLoader's, where the
    # framework has none)
    plain = _finding(build(), rule)
    kept = tuple(
        f for f in plain.fix if frameworks.uses_dataloader(framework) or "DataLoader" not in f
    )
    assert own.fix[: len(kept)] == kept
    assert not any(f.startswith("with ") for f in plain.fix)


def _slow_validation_loader(sess: Session) -> Session:
    """A validation loader without workers beside the training loader, whose batches take
    the main process 5 ms each to make."""
    log = sess.processes[0]
    log.add_line(f"L 1 {json.dumps({**DEFAULT_LOADER, 'num_workers': 0, 'batch_size': 64})}")
    log.add_line("F 9000000 100 500000 0 0")
    return sess


def test_nanogpt_is_never_told_to_give_a_dataloader_workers(tmp_path: Path) -> None:
    """nanoGPT slices a memory-mapped file in get_batch: even where some DataLoader was seen,
    its evaluations are told eval_iters and eval_interval, not a validation loader's workers."""
    plain = _finding(_slow_validation_loader(eval_stall(0.06)), "eval-stall")
    assert any("DataLoader workers" in f for f in plain.fix)
    ng = _finding(
        _run_by(_slow_validation_loader(eval_stall(0.06)), "nanogpt", tmp_path), "eval-stall"
    )
    assert not any("worker" in f.lower() for f in ng.fix), ng.fix
    assert "nanogpt" not in frameworks.settings("workers", "persistent_workers", "pin_memory")


def test_a_rule_asking_for_an_unknown_knob_fails_at_import() -> None:
    with pytest.raises(ValueError, match="unknown knob"):
        frameworks.settings("eval_every", "eval_often")


@pytest.mark.parametrize("framework", sorted(SCRIPTS))
def test_a_script_is_told_by_what_it_defines(framework: str, tmp_path: Path) -> None:
    path = _script(tmp_path, SCRIPTS[framework])
    frames = (("<module>", path, 20), ("main", path, 30))
    assert frameworks.detect([StackSpan(0.0, 1.0, frames)]) == framework
    # run as a module (python -m): the runpy frames above it are not the user's
    runpy = (("_run_module_as_main", "/usr/lib/python3.11/runpy.py", 198),)
    assert frameworks.detect([StackSpan(0.0, 1.0, runpy + frames)]) == framework
    # without stacks (run --no-stacks): the outermost module that stepped the optimizer
    callers = [["main", path], ["<module>", path]]
    assert frameworks.detect([], [{"step_callers": callers}]) == framework


def test_a_script_run_by_a_wrapper_is_told_by_what_it_defines(tmp_path: Path) -> None:
    """``python cpu_torchvision.py train.py ...``: the wrapper runs timm's train.py with runpy;
    both are the user's modules, and the one that defines timm's flags names it."""
    wrapper = tmp_path / "cpu_torchvision.py"
    wrapper.write_text("import runpy, sys\nrunpy.run_path(sys.argv[1], run_name='__main__')\n")
    train = _script(tmp_path, TIMM)
    frames = (
        ("<module>", str(wrapper), 2),
        ("run_path", "/usr/lib/python3.11/runpy.py", 291),
        ("<module>", train, 9),
        ("train_one_epoch", train, 30),
    )
    assert frameworks.detect([StackSpan(0.0, 1.0, frames)]) == "timm"
    callers = [[f, p] for f, p, _line in reversed(frames)]
    assert frameworks.detect([], [{"step_callers": callers}]) == "timm"


def test_a_script_of_ones_own_is_no_framework(tmp_path: Path) -> None:
    path = _script(tmp_path, NEAR_MISS)
    assert frameworks.detect([StackSpan(0.0, 1.0, (("<module>", path, 3),))]) is None
    gone = str(tmp_path / "deleted.py")  # a run analysed where its script is not
    assert frameworks.detect([StackSpan(0.0, 1.0, (("<module>", gone, 3),))]) is None
    broken = tmp_path / "broken.py"
    broken.write_text("def (:\n")
    assert frameworks.detect([StackSpan(0.0, 1.0, (("<module>", str(broken), 1),))]) is None


def test_a_frameworks_loop_outranks_what_the_script_defines(tmp_path: Path) -> None:
    """A Lightning job launched from a script with -j/--workers is Lightning's loop."""
    path = _script(tmp_path, EXAMPLES)
    fit = ("_FitLoop.run", f"{SITE}/lightning/pytorch/loops/fit_loop.py", 216)
    spans = [StackSpan(0.0, 1.0, (("<module>", path, 3), fit))]
    assert frameworks.detect(spans) == "lightning"


def test_every_framework_has_a_name_and_only_known_knobs() -> None:
    assert set(frameworks.WORDS) == set(frameworks.NAMES)
    for words in frameworks.WORDS.values():
        assert set(words) <= set(frameworks.KNOBS)


def test_no_framework_runs_a_loop_of_ones_own() -> None:
    sess = session(*eval_stall(0.06).processes)
    assert analyze(sess)[0].activity.framework is None
