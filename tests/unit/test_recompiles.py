"""recompiles on synthetic sessions: the probe's compile records (when, under which line, what
Dynamo said), the time ledger's compile bucket from them, and the finding: graphs compiled
while training, Dynamo giving up at its recompile limit, each with the fix for what changed."""

from __future__ import annotations

import json

from synth import process, session
from test_rule_thresholds import compiles_log

from trainprof.analysis import compiles, ledger
from trainprof.analysis.findings import Finding
from trainprof.analysis.pipeline import analyze
from trainprof.analysis.stalls import Stall
from trainprof.probe.compiles import gave_up
from trainprof.store.session import Session

SHAPE = "0/2: tensor 'tokens' size mismatch at index 1. expected 62, actual 53"


def _finding(sess: Session) -> Finding | None:
    return next((f for f in analyze(sess)[1].findings if f.id == "recompiles"), None)


def _with_reasons(log, *reasons: tuple[str, bool]):  # type: ignore[no-untyped-def]
    for k, (reason, limit) in enumerate(reasons):
        rec = {"id": f"0/{k + 1}", "reason": reason, "gave_up": limit}
        log.add_line("X " + json.dumps({"t": 9_000_000 + k, "recompile": rec}))
    return log


def test_graphs_compiled_while_training_claim_their_time_and_name_the_line() -> None:
    f = _finding(session(_with_reasons(compiles_log(4, 0.3), (SHAPE, False))))
    assert f is not None
    assert f.title == "torch.compile recompiles while training (4 graphs after warm-up, 1.20 s)"
    assert f.impact is not None and abs(f.impact - 1.2 / 9.4) < 0.02
    assert f.where == "/home/user/proj/train.py:40 (main)"
    text = "\n".join(f.evidence)
    assert "4 graphs compiled after warm-up (4 in all), 1.20 s of the steady run (13%)" in text
    assert "its input tokens changed shape: its dimension 1 was 62 when compiled, 53" in text
    assert "mark_dynamic(tokens, 1)" in f.fix[1] and "multiple of 64" in f.fix[0]


def test_giving_up_at_the_limit_is_named_though_every_compile_was_warm_up() -> None:
    log = _with_reasons(compiles_log(8, 0.1, at_s=0.1, gap_s=0.2), (SHAPE, False), (SHAPE, True))
    f = _finding(session(log))
    assert f is not None
    assert f.title.startswith("torch.compile gave up on the model after compiling 8 graphs")
    assert f.impact is None  # no steady compile time; running uncompiled was not measured
    assert "8 graphs compiled, all during warm-up" in f.evidence[0]
    assert any("not measured" in e for e in f.evidence)
    assert "only buys more compiles" in f.fix[-1]


def test_one_recompile_or_cheap_ones_are_left_alone() -> None:
    assert _finding(session(compiles_log(1, 2.0))) is None  # a one-off, however long
    assert _finding(session(compiles_log(3, 0.05))) is None  # 1.6 % of the steady run


def test_a_job_that_does_not_compile_skips_the_rule_with_the_reason() -> None:
    skipped = {s.id: s.reason for s in analyze(session(process(100)))[1].skipped}
    assert "did not compile with torch.compile" in skipped["recompiles"]


def test_the_batch_dimension_gets_drop_last_and_other_guards_the_generic_fix() -> None:
    batch = "0/1: tensor 'args[0]' size mismatch at index 0. expected 16, actual 7"
    f = _finding(session(_with_reasons(compiles_log(3, 0.3), (batch, False))))
    assert f is not None
    assert "the compiled model's input 1 changed shape: its batch size was 16" in f.evidence[1]
    assert "drop_last=True" in f.fix[0] and "mark_dynamic(x, 0)" in f.fix[1]
    other = "0/1: L['self'].training == True"
    f = _finding(session(_with_reasons(compiles_log(3, 0.3), (other, False))))
    assert f is not None
    assert f.evidence[1] == "Dynamo's reason for recompiling: L['self'].training == True"
    assert "torch.tensor(value)" in f.fix[0]


def test_a_compile_inside_an_evaluation_is_the_evaluations_time() -> None:
    cols = ledger.StepCols(
        0.0, [1_000_000, 2_000_000], [1_000_000, 1_000_000], [0, 0], [0, 0], [1, 1], 0
    )
    args = dict(saves=(), stalls=(), epoch_first_steps=(), main_fetch=None, step_profile=None)
    led = ledger.build(cols, evals=[(0.2, 0.6)], compiles=[(0.4, 0.9), (1.5, 1.7)], **args)
    assert abs(led.get("eval") - 0.4) < 1e-9
    assert abs(led.get("compile") - 0.5) < 1e-9  # 0.6–0.9 and 1.5–1.7


def test_a_stall_the_probe_saw_compiling_is_a_compile() -> None:
    log = compiles.read(compiles_log(1, 0.5))
    assert log is not None
    cpu = Stall(index=30, t0=104.9, t1=105.6, excess_s=0.6, cause="cpu")
    eval_ = Stall(index=31, t0=104.9, t1=105.6, excess_s=0.6, cause="eval")
    elsewhere = Stall(index=60, t0=108.0, t1=108.6, excess_s=0.5, cause="cpu")
    out = compiles.label_stalls([cpu, eval_, elsewhere], log)
    assert [s.cause for s in out] == ["compile", "eval", "cpu"]


def test_damaged_compile_records_are_skipped() -> None:
    log = process(10)
    for bad in ({"t0": "x", "t1": 5}, {"t0": 9, "t1": 3}, {"t0": True, "t1": 4}, "nope"):
        log.add_line("X " + json.dumps({"t": 1, "compile": bad}))
    assert compiles.read(log) is None
    log.add_line("X " + json.dumps({"t": 1, "compile": {"t0": 1, "t1": 2, "line": "x"}}))
    read = compiles.read(log)
    assert read is not None and read.compiles[0].where is None


def test_the_recompile_limit_is_read_in_each_torchs_words() -> None:
    assert gave_up("Dynamo recompile limit exceeded\n  Explanation: ...")
    assert gave_up("cache_size_limit reached")  # torch < 2.6
    assert not gave_up("Graph break: unsupported builtin")


def _graph_breaks(sess: Session) -> Finding | None:
    return next((f for f in analyze(sess)[1].findings if f.id == "graph-breaks"), None)


def test_graph_breaks_name_the_models_lines_first_and_the_fix_for_each_reason() -> None:
    log = compiles_log(1, 0.5, at_s=0.5)
    sites = [
        ("/venv/site-packages/lib/layers.py", 7, "attend"),
        ("/home/user/proj/model.py", 31, "forward"),
    ]
    for file, line, function in sites:
        rec = {"file": file, "line": line, "function": function}
        log.add_line("X " + json.dumps({"t": 600_000, "graph_break": rec}))
    for reason, detail in (
        ("Unsupported Tensor.item() call with capture_scalar_outputs=False", ""),
        ("Failed to trace builtin operator", "builtin operator `print` with argument types"),
    ):
        rec = {"reason": reason, **({"detail": detail} if detail else {})}
        log.add_line("X " + json.dumps({"t": 600_001, "graph_break_reason": rec}))
    f = _graph_breaks(session(log))
    assert f is not None
    # the job's own line; a break in a library's code is not the job's to fix
    assert f.title.startswith("torch.compile breaks the model's graph at 1 line")
    assert f.where == "/home/user/proj/model.py:31 (forward)"
    assert "Failed to trace builtin operator (builtin operator `print`" in f.evidence[1]
    assert f.impact is None and "not measured" in f.evidence[2]
    assert "capture_scalar_outputs = True" in f.fix[0] and "training loop" in f.fix[1]
    assert "fullgraph=True" in f.fix[-1]


def test_graph_breaks_inside_torch_alone_are_left_alone() -> None:
    """torch.optim breaks its own graph on purpose (a compiled optimizer step under an LR
    scheduler breaks in torch/optim/optimizer.py): nothing the job can change."""
    log = compiles_log(1, 0.5, at_s=0.5)
    rec = {"file": "/venv/site-packages/torch/optim/optimizer.py", "line": 530, "function": "f"}
    log.add_line("X " + json.dumps({"t": 600_000, "graph_break": rec}))
    assert _graph_breaks(session(log)) is None
