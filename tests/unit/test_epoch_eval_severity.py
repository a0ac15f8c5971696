"""An evaluation at most once per epoch at a few percent of the run is normal practice: a note,
not a warning; and a CPU job whose time is its own forward and backward is called
compute-bound where the report states the bottleneck."""

from __future__ import annotations

import json

import pytest
from synth import DEFAULT_LOADER, loop_spans, process, session
from test_rule_thresholds import eval_stall

from trainprof.analysis.cpu_verdict import cpu_bottleneck
from trainprof.analysis.findings import Finding
from trainprof.analysis.ledger import Ledger
from trainprof.analysis.pipeline import analyze
from trainprof.store.session import Session


def _eval_finding(sess: Session) -> Finding:
    found = {f.id: f for f in analyze(sess)[1].findings}
    return found["eval-stall"]


def _with_passes(sess: Session, passes: int) -> Session:
    """``passes`` passes over the training loader, spread over the 100 steps."""
    log = sess.processes[0]
    for p in range(passes):
        log.add_line(f"E 0 {1_000_000 + p * 10_000_000 // passes} 1000")
    return sess


def _with_length(sess: Session, batches: int) -> Session:
    """The training loader's length: ``batches`` per epoch (one pass over it, the first)."""
    log = sess.processes[0]
    log.add_line(f"L 0 {json.dumps({**DEFAULT_LOADER, 'len': batches})}")
    log.add_line("E 0 1000000 1000")
    return sess


def test_once_per_epoch_at_a_few_percent_is_a_note() -> None:
    """8 evaluations over 8 epochs, 6 % of the run."""
    f = _eval_finding(_with_passes(eval_stall(0.06), 8))
    assert f.severity == "info", f
    assert f.title == "Evaluation once per epoch takes 6% of the run"
    assert any("8 evaluations in 8 epochs of training" in e for e in f.evidence), f.evidence
    assert f.fix  # still says how to make it cheaper


def test_more_often_than_once_per_epoch_stays_a_warning() -> None:
    f = _eval_finding(_with_passes(eval_stall(0.06), 4))  # twice per epoch
    assert f.severity == "warning"
    assert f.title.startswith("Evaluation between steps")


def _evals(share: float, count: int) -> Session:
    """eval_stall's run with ``count`` evaluations, each between two steps 100 ms apart, taking
    ``share`` of the 9.4 s steady run together."""
    log = process(100, step_s=0.1)
    for i in range(10, 90, 80 // count):
        start = int(log.steps["t"][i]) + 1
        log.add_line(f"M {start} 0")
        log.add_line(f"M {start + int(share * 9.4 / count * 1e6)} 1")
    return session(log)


def test_once_per_epoch_at_a_large_share_stays_a_warning() -> None:
    assert _eval_finding(_with_passes(_evals(0.08, 16), 16)).severity == "info"
    f = _eval_finding(_with_passes(_evals(0.12, 16), 16))
    assert f.severity == "warning", f


def test_without_passes_the_loaders_length_tells_the_epoch() -> None:
    """10 batches an epoch and an evaluation every 10 steps: once per epoch; with 20 batches
    an epoch, twice."""
    assert _eval_finding(_with_length(eval_stall(0.06), 10)).severity == "info"
    assert _eval_finding(_with_length(eval_stall(0.06), 20)).severity == "warning"


def test_no_epochs_seen_is_a_warning() -> None:
    """A loop without a DataLoader (nanoGPT's) has no epochs to judge by."""
    sess = eval_stall(0.06)
    sess.processes[0].loaders.clear()
    assert _eval_finding(sess).severity == "warning"


def _ledger(**shares: float) -> Ledger:
    return Ledger(10.0, {b: s * 10.0 for b, s in shares.items()}, "stack samples")


@pytest.mark.parametrize(
    ("shares", "verdict"),
    [
        ({"forward": 0.4, "backward": 0.4, "optimizer": 0.1, "fetch": 0.03}, "compute-bound"),
        ({"forward": 0.3, "backward": 0.3, "fetch": 0.3, "loop": 0.05}, "input-bound"),
        ({"forward": 0.3, "backward": 0.2, "logging": 0.3, "fetch": 0.02}, "host-bound"),
        ({"forward": 0.2, "backward": 0.2, "fetch": 0.15, "loop": 0.15}, "mixed"),
    ],
)
def test_the_cpu_verdict_names_what_bounds_the_step(shares: dict[str, float], verdict: str) -> None:
    b = cpu_bottleneck(_ledger(**shares))
    assert b is not None and b.verdict == verdict, b


def test_without_a_split_step_only_data_can_bound_it() -> None:
    unsplit = Ledger(10.0, {"step": 9.0, "fetch": 0.5}, "not split")
    assert cpu_bottleneck(unsplit) is None
    waits = Ledger(10.0, {"step": 6.0, "fetch": 4.0}, "not split")
    b = cpu_bottleneck(waits)
    assert b is not None and b.verdict == "input-bound"


def test_a_cpu_job_that_runs_its_model_is_called_compute_bound() -> None:
    sess = session(process(100))
    loop_spans(sess, {"model(x)": 0.9, "x = x.flatten(1)": 0.1}, 102.5, 111.5)
    m = analyze(sess)[0]
    assert m.bottleneck is not None and m.bottleneck.verdict == "compute-bound", m.bottleneck
    assert "forward, backward and optimizer step took 90%" in m.bottleneck.reason
