"""The table of costly calls (analysis/costly_calls.json): each row is recognised on its example
line, and a finding whose hot line makes the call quotes the line and gives the row's fix; a
line the table does not know is quoted with a neutral fix."""

from __future__ import annotations

import pytest
from synth import loop_spans, process, session
from test_rule_thresholds import STEADY, periodic

from trainprof.analysis.costly_calls import CostlyCall, identify, table
from trainprof.analysis.findings import Finding
from trainprof.analysis.pipeline import analyze
from trainprof.store.session import Session
from trainprof.store.stacks import StackSpan

TRAIN = "/home/user/proj/train.py"
EXAMPLES = {row.call: row for row in table()}


def test_the_table_has_at_least_30_calls_each_with_why_and_fix() -> None:
    assert len(table()) >= 30
    assert all(row.why and row.fix and row.match for row in table())


@pytest.mark.parametrize("row", table(), ids=lambda r: r.call)
def test_each_call_is_recognised_on_its_example(row: CostlyCall) -> None:
    assert identify(row.example) == row


def stalled(text: str) -> Session:
    """300 steps of 20 ms, every 30th stalled 0.2 s in a helper whose hot line is ``text``."""
    sess = session(periodic(300, 0.02, 30, 0.2))
    log = sess.processes[0]
    spans, end = [], log.t0
    torch = "/venv/site-packages/torch"
    forward = (("Module._call_impl", f"{torch}/nn/modules/module.py", 1),)
    backward = (("backward", f"{torch}/autograd/__init__.py", 1),)
    for t_us, d_us in zip(log.steps["t"], log.steps["dur"], strict=True):
        t1 = log.t0 + t_us / 1e6
        if d_us > 3 * 20_000 and t_us > 2_000_000:  # a stalled step: the helper, then the step
            call = (("<module>", TRAIN, 1), ("main", TRAIN, 12), ("housekeeping", TRAIN, 30))
            spans.append(StackSpan(end, t1 - 0.02, call))
            end = t1 - 0.02
        mid = (end + t1) / 2
        spans.append(StackSpan(end, mid, (("<module>", TRAIN, 1), ("main", TRAIN, 11), *forward)))
        spans.append(StackSpan(mid, t1, (("<module>", TRAIN, 1), ("main", TRAIN, 13), *backward)))
        end = t1
    sess.source.update(
        {
            (TRAIN, 11): "loss = model(x)",
            (TRAIN, 12): "housekeeping(step)",
            (TRAIN, 13): "loss.backward()",
        }
    )
    sess.source[(TRAIN, 30)] = text
    sess.spans = spans
    return sess


def stall_finding(sess: Session) -> Finding:
    # a stall on a line that prints, logs or writes a log file is logging by its call context
    stalls = ("cpu-stall", "blocking-stall", "logging-overhead")
    found = [f for f in analyze(sess)[1].findings if f.id in stalls]
    assert found, [f.id for f in analyze(sess)[1].findings]
    return found[0]


@pytest.mark.parametrize("row", table(), ids=lambda r: r.call)
def test_a_stall_on_the_call_gives_its_fix_and_quotes_the_line(row: CostlyCall) -> None:
    f = stall_finding(stalled(row.example))
    assert f.fix[0].startswith(row.fix)
    assert any(f"`{row.example}`" in e and row.why in e for e in f.evidence), f.evidence
    assert "vectorise" not in " ".join(f.fix)


def test_an_unknown_line_is_quoted_with_the_general_fix() -> None:
    f = stall_finding(stalled("labels = viterbi(scores, transitions)"))
    assert any("`labels = viterbi(scores, transitions)`" in e for e in f.evidence)
    assert f.fix[0].startswith("move housekeeping() off the training loop")


def loop_finding(text: str) -> Finding:
    s = session(process(100))
    loop_spans(s, {text: 0.5, "model(x)": 0.5}, *STEADY)
    return next(f for f in analyze(s)[1].findings if f.id == "loop-overhead")


def test_per_step_host_work_names_the_call_and_its_fix() -> None:
    """A loop that called gc.collect() after every step was told to compute its metrics every
    N steps and to use torch._foreach_norm."""
    f = loop_finding("gc.collect()")
    row = EXAMPLES["gc.collect()"]
    assert f.title.startswith("gc.collect() in the training loop takes")
    assert f.fix[0].startswith(row.fix) and "foreach_norm" not in " ".join(f.fix)
    assert any("`gc.collect()`" in e for e in f.evidence)


def test_per_step_host_work_on_an_unknown_line_gets_a_neutral_fix() -> None:
    f = loop_finding("state = rebalance(state, weights)")
    assert f.fix[0].startswith("make `state = rebalance(state, weights)` cheaper")
