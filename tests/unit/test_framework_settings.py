"""Which framework runs the loop, from the main thread's stacks, and the setting its findings
add: only for the framework's own training loop, never for a loop of one's own."""

from __future__ import annotations

import pytest
from test_worker_transfer import _job

from trainprof.analysis import frameworks
from trainprof.analysis.pipeline import analyze
from trainprof.analysis.rules.registry import RuleError, define
from trainprof.store.stacks import StackSpan

SITE = "/venv/lib/python3.11/site-packages"
HF_STEP = (
    ("<module>", "/home/u/train.py", 30),
    ("Trainer.train", f"{SITE}/transformers/trainer.py", 2100),
    ("Trainer._inner_training_loop", f"{SITE}/transformers/trainer.py", 2500),
)
PL_STEP = (
    ("<module>", "/home/u/train.py", 40),
    ("_FitLoop.run", f"{SITE}/lightning/pytorch/loops/fit_loop.py", 216),
)
IMPORT_ONLY = (
    ("<module>", "/home/u/train.py", 1),
    ("<module>", f"{SITE}/transformers/__init__.py", 1),
)


def _spans(*stacks: tuple[tuple[str, str, int], ...]) -> list[StackSpan]:
    return [StackSpan(i, i + 1, frames) for i, frames in enumerate(stacks)]


def test_the_framework_whose_loop_ran_is_named() -> None:
    assert frameworks.detect(_spans(HF_STEP, HF_STEP)) == "transformers"
    assert frameworks.detect(_spans(PL_STEP, HF_STEP, PL_STEP)) == "lightning"


def test_an_imported_framework_that_runs_no_loop_is_none() -> None:
    assert frameworks.detect(_spans(IMPORT_ONLY)) is None


def test_without_stacks_the_frame_that_stepped_the_optimizer_names_it() -> None:
    """The probe's ``step_callers`` (innermost first); a malformed record names nothing."""
    callers = [[name, path] for name, path, _line in reversed(PL_STEP)]
    assert frameworks.detect([], [{"step_callers": callers}]) == "lightning"
    own = [["main", "/home/u/train.py"], ["<module>", "/home/u/train.py"]]
    assert frameworks.detect([], [{"step_callers": own}]) is None
    assert frameworks.detect([], [{"step_callers": [["f", 3], "x", None]}]) is None
    # stacks, where there are any, decide
    assert frameworks.detect(_spans(HF_STEP), [{"step_callers": callers}]) == "transformers"
    assert frameworks.detect([]) is None


def test_a_finding_gets_the_setting_of_the_framework_that_runs_the_loop() -> None:
    sess = _job(receive_share=0.1)  # an input-bound job with stacks
    plain = analyze(sess)[1].findings[0]
    assert not any(f.startswith("with the Hugging Face Trainer") for f in plain.fix)
    sess.spans = [*sess.spans, StackSpan(90.0, 90.5, HF_STEP)]  # before the steady window
    hf = analyze(sess)[1].findings[0]
    assert hf.id == "input-bound"
    assert hf.fix[: len(plain.fix)] == plain.fix
    assert hf.fix[-1].startswith("with the Hugging Face Trainer: the Trainer builds the DataLoader")


def test_a_setting_for_an_unknown_framework_fails_at_import() -> None:
    with pytest.raises(RuleError, match="unknown framework"):
        define(
            id="x-rule", title="X", family="host", severity="warning", needs=(), claims=(),
            thresholds=(), check=None, doc="Anti-pattern:\n\nBest practice:\n",
            settings={"keras": "model.fit(...)"},
        )  # fmt: skip
