"""anomaly-detection on synthetic sessions: the stacks autograd keeps for each op get their own
ledger bucket (FX's tracing, which calls the same function, does not), the probe's readings
say how long it was on and where it was turned on, and the finding claims the measured time."""

from __future__ import annotations

import json

from synth import process, session
from test_device import gpu_session
from test_rule_thresholds import anomaly

from trainprof.analysis import attribution, debug_modes
from trainprof.analysis.findings import Finding
from trainprof.analysis.pipeline import analyze
from trainprof.store.session import Session
from trainprof.store.stacks import StackSpan

TRAIN = "/home/user/proj/train.py"
TORCH = "/venv/site-packages/torch"
FORWARD = (
    ("<module>", TRAIN, 50),
    ("main", TRAIN, 12),
    ("Module._call_impl", f"{TORCH}/nn/modules/module.py", 1750),
    ("Linear.forward", f"{TORCH}/nn/modules/linear.py", 125),
)
# What py-spy shows of an op recorded under anomaly detection: autograd's C++ calls
# torch.fx.traceback.format_stack straight from the op's Python caller.
KEEPING = FORWARD + (
    ("format_stack", f"{TORCH}/fx/traceback.py", 200),
    ("extract_stack", "/usr/lib/python3.11/traceback.py", 231),
)


def _finding(sess: Session) -> Finding | None:
    return next((f for f in analyze(sess)[1].findings if f.id == "anomaly-detection"), None)


def test_the_stack_kept_for_an_op_is_anomaly_time_and_fx_tracing_is_not() -> None:
    assert attribution.category(KEEPING, {}) == "anomaly"
    assert attribution.category(FORWARD, {}) == "forward"
    tracing = (
        ("symbolic_trace", f"{TORCH}/fx/_symbolic_trace.py", 1300),
        ("TracerBase.create_proxy", f"{TORCH}/fx/proxy.py", 220),
        ("format_stack", f"{TORCH}/fx/traceback.py", 200),
    )
    assert attribution.category(tracing, {}) != "anomaly"


def test_readings_give_the_share_it_was_on_and_the_line_that_turned_it_on() -> None:
    log = process(10)
    callers = [
        ["set_detect_anomaly.__init__", f"{TORCH}/autograd/anomaly_mode.py", 117],
        ["main", TRAIN, 7],
        ["<module>", TRAIN, 50],
    ]
    log.add_line("X " + json.dumps({"t": 1_000_000, "anomaly_callers": callers}))
    for t_us, on in ((2_000_000, True), (6_000_000, False), (8_000_000, True)):
        rec = {"anomaly": on, "check_nan": False, "launch_blocking": "1"}
        log.add_line("X " + json.dumps({"t": t_us, "debug": rec}))
    modes = debug_modes.read(log)
    assert modes is not None
    t0 = log.t0
    # on from the window's start to 6 s, off to 8 s, on again to the end (10 s)
    assert abs(modes.anomaly_share(t0 + 4, t0 + 10) - 4 / 6) < 1e-9
    assert modes.anomaly_share(t0 + 6, t0 + 8) == 0.0
    assert modes.anomaly_at == ("main", TRAIN, 7)
    assert not modes.checks_nan()
    assert modes.launch_blocking == "1" and modes.launch_blocking_on
    assert debug_modes.read(process(10)) is None


def test_the_finding_claims_the_kept_stacks_from_the_ledger() -> None:
    sess = anomaly(1.0)
    spans, t = [], 102.0
    while t < 112.0:  # each 0.1 s step: 40 % keeping stacks, the rest the forward pass
        spans += [StackSpan(t, t + 0.04, KEEPING), StackSpan(t + 0.04, t + 0.1, FORWARD)]
        t += 0.1
    sess.spans = spans
    f = _finding(sess)
    assert f is not None
    assert f.impact is not None and abs(f.impact - 0.4) < 0.02
    assert f.title == (
        "Anomaly detection is on: keeping a stack for every op takes 40% of the training time"
    )
    assert "on for all of the steady run" in f.evidence[0] and "for NaN" in f.evidence[0]
    assert "not measured apart" in f.evidence[2]


def test_without_stack_samples_it_is_named_with_its_cost_not_measured() -> None:
    f = _finding(anomaly(0.7))
    assert f is not None and f.impact is None
    assert f.title == "Anomaly detection is left on while the model trains"
    assert "on for 70% of the steady run" in f.evidence[0]
    assert "not measured" in f.evidence[1]


def test_a_run_that_never_turned_it_on_is_left_alone() -> None:
    log = process(100)
    rec = {"anomaly": False, "check_nan": True, "launch_blocking": None}
    log.add_line("X " + json.dumps({"t": 2_000_000, "debug": rec}))
    assert _finding(session(log)) is None


def test_launch_blocking_explains_an_idle_gpu_instead_of_launch_bound() -> None:
    """An idle GPU with nothing else to blame is launch-bound, unless CUDA_LAUNCH_BLOCKING is
    set: then the fix is to unset it, not a bigger batch."""
    sess = gpu_session(fwd_ms=9.0, gap_ms=0.5, util=20.0)
    rec = {"anomaly": False, "check_nan": True, "launch_blocking": "1"}
    sess.processes[0].add_line("X " + json.dumps({"t": 2_000_000, "debug": rec}))
    ids = [f.id for f in analyze(sess)[1].findings]
    assert ids[0] == "launch-blocking" and "launch-bound" not in ids
    f = analyze(sess)[1].findings[0]
    assert f.impact is None and "not measured" in f.evidence[-1]
    assert "sat idle" in f.evidence[1] and "its own clock" in f.evidence[1]


def test_attach_names_it_from_the_stacks_alone() -> None:
    """attach has no probe: stacks that keep an op's stack say anomaly detection is on, with
    their share; a loop without them is left alone."""
    backward = (("<module>", TRAIN, 50), ("backward", f"{TORCH}/autograd/__init__.py", 1))

    def attached(keeping: bool) -> Session:
        spans, t = [], 0.0
        for _ in range(300):  # 3 s of 10 ms steps: 3 ms keeping stacks (or forward), 7 backward
            spans.append(StackSpan(t, t + 0.003, KEEPING if keeping else FORWARD))
            spans.append(StackSpan(t + 0.003, t + 0.01, backward))
            t += 0.01
        sess = session(attach={"pid": 1000, "rate_hz": 100})
        sess.spans = spans
        return sess

    f = _finding(attached(True))
    assert f is not None and f.where is None
    assert f.impact is not None and abs(f.impact - 0.3) < 0.02
    assert "only with anomaly detection on" in f.evidence[0]
    assert _finding(attached(False)) is None
