"""What fills the step (analysis/work_kind.py): the kind of work a stack does, read from the
library the user's line calls into; the user's host work inside the model's forward is host
work, not the model; a wait every step is a blocking wait, with that kind's fix; a stall that
formats a tensor into a log record is logging. Synthetic sessions: py-spy's frames, as
recorded (``--idle``: a blocked thread shows the Python frame that made the C call)."""

from __future__ import annotations

import pytest
from synth import process, session
from test_rule_thresholds import STEADY, periodic

from trainprof.analysis import work_kind
from trainprof.analysis.attribution import category
from trainprof.analysis.pipeline import analyze
from trainprof.store.session import Session
from trainprof.store.stacks import Frame, StackSpan

TRAIN = "/home/user/proj/train.py"
LIB = "/usr/lib/python3.11"
SITE = "/venv/lib/python3.11/site-packages"
MODULE = ("Module._call_impl", f"{SITE}/torch/nn/modules/module.py", 1789)
BACKWARD = ("backward", f"{SITE}/torch/autograd/__init__.py", 395)
LOOP = (("<module>", TRAIN, 1), ("main", TRAIN, 40))
SOURCE = {
    (TRAIN, 40): "stats = resident_mb()",
    (TRAIN, 12): 'out = subprocess.run(["ps", "-o", "rss="], capture_output=True)',
    (TRAIN, 20): "lo, hi = np.percentile(row, [1, 99])",
    (TRAIN, 21): "h = torch.relu(self.fc(x))",
    (TRAIN, 22): "time.sleep(0.01)",
    (TRAIN, 23): "with self.lock:",
    (TRAIN, 24): 'log.debug("attention %s", attn)',
    (TRAIN, 25): "q = x.detach().numpy()",
    (TRAIN, 26): "counts = [int(v) for v in h.argmax(dim=1).tolist()]",
}


def at(line: int, func: str = "helper") -> Frame:
    return (func, TRAIN, line)


CHILD = (
    *LOOP,
    at(12),
    ("run", f"{LIB}/subprocess.py", 550),
    ("Popen.communicate", f"{LIB}/subprocess.py", 1209),
    ("Popen._communicate", f"{LIB}/subprocess.py", 2115),
    ("select", f"{LIB}/selectors.py", 415),  # the innermost frame: a selector, not the wait's kind
)
HTTP = (
    *LOOP,
    at(40),
    ("post", f"{SITE}/requests/api.py", 115),
    ("HTTPConnection.getresponse", f"{LIB}/http/client.py", 1390),
    ("SocketIO.readinto", f"{LIB}/socket.py", 706),
)
TENSOR_LOG = (
    *LOOP,
    at(24),
    ("Logger.debug", f"{LIB}/logging/__init__.py", 1477),
    ("Tensor.__repr__", f"{SITE}/torch/_tensor.py", 568),
    ("_str", f"{SITE}/torch/_tensor_str.py", 708),
)
NUMPY = (*LOOP, at(20), ("percentile", f"{SITE}/numpy/lib/_function_base_impl.py", 4246))
# numpy's formatter turning a whole array into text for a log line: formatting, not numpy work
ARRAY_TEXT = (
    *LOOP,
    at(20, "log_attention"),
    ("array2string", f"{SITE}/numpy/_core/arrayprint.py", 760),
    ("_formatArray", f"{SITE}/numpy/_core/arrayprint.py", 890),
)
HOOK_NUMPY = (*LOOP, MODULE, at(20, "record_stats"), NUMPY[-1])
FUNCTION_NUMPY = (
    *LOOP,
    MODULE,
    ("forward", TRAIN, 49),
    ("apply", f"{SITE}/torch/autograd/function.py", 575),
    at(20, "FakeQuant.forward"),
    NUMPY[-1],
)
MODEL_OP = (*LOOP, MODULE, at(21, "Net.forward"))
BACKWARD_NUMPY = (*LOOP, BACKWARD, at(25, "FakeQuant.backward"))


@pytest.mark.parametrize(
    ("frames", "kind"),
    [
        (CHILD, work_kind.WAIT_CHILD),
        (HTTP, work_kind.WAIT_SOCKET),
        (TENSOR_LOG, work_kind.LOGGING),
        (NUMPY, work_kind.NUMPY),
        ((*LOOP, at(22)), work_kind.SLEEP),
        ((*LOOP, at(23)), work_kind.WAIT_LOCK),
        (MODEL_OP, work_kind.TORCH),
        ((*LOOP, at(12), ("_execute_child", f"{LIB}/subprocess.py", 1900)), work_kind.WAIT_CHILD),
        ((*LOOP, MODULE, at(26, "Net.forward")), work_kind.TO_HOST),
        (ARRAY_TEXT, work_kind.LOGGING),
    ],
    ids=[
        "child",
        "http",
        "tensor-log",
        "numpy",
        "sleep",
        "lock",
        "model-op",
        "fork",
        "tolist",
        "array-text",
    ],  # fmt: skip
)
def test_the_kind_is_what_the_users_line_calls(frames: tuple[Frame, ...], kind: str) -> None:
    assert work_kind.of_frames(frames, SOURCE) == kind


def test_every_kind_has_its_words_and_its_fix() -> None:
    kinds = work_kind.HOST | {work_kind.TORCH}
    assert set(work_kind.DESCRIBE) == set(work_kind.FIX) == kinds


def test_host_work_inside_the_forward_is_the_users_not_the_models() -> None:
    # a forward hook and a custom autograd.Function computing in numpy: host work of the loop
    assert category(HOOK_NUMPY, SOURCE) == "other"
    assert category(FUNCTION_NUMPY, SOURCE) == "other"
    assert category(BACKWARD_NUMPY, SOURCE) == "other"
    assert category((*LOOP, MODULE, at(26, "Net.forward")), SOURCE) == "other"
    # on a GPU, a copy to the host inside the forward waits for the GPU: a sync
    assert category((*LOOP, MODULE, at(26, "Net.forward")), SOURCE, cuda=True) == "sync"
    # the model's own tensor code stays the forward pass
    assert category(MODEL_OP, SOURCE) == "forward"
    assert category(ARRAY_TEXT, SOURCE) == "logging"
    assert category((*LOOP, MODULE, ("linear", f"{SITE}/torch/nn/functional.py", 1)), SOURCE) == (
        "forward"
    )


def test_a_hook_is_said_to_run_inside_the_forward() -> None:
    spans = [StackSpan(0.0, 1.0, HOOK_NUMPY)]
    assert work_kind.inside_model(spans, at(20, "record_stats")) == "forward"
    assert work_kind.inside_model([StackSpan(0.0, 1.0, NUMPY)], at(20)) is None


def per_step(share: float, frames: tuple[Frame, ...], model_share: float = 0.3) -> Session:
    """100 steps of 0.1 s: each runs the model for ``model_share`` of the step, then ``frames``
    for ``share`` of it, then the optimizer."""
    sess = session(process(100))
    spans, t = [], STEADY[0]
    forward = (*LOOP[:1], ("main", TRAIN, 41), MODULE)
    opt = (*LOOP[:1], ("main", TRAIN, 42), ("step", f"{SITE}/torch/optim/adam.py", 1))
    while t + 0.1 <= STEADY[1]:
        a, b = t + model_share * 0.1, t + (model_share + share) * 0.1
        spans += [StackSpan(t, a, forward), StackSpan(a, b, frames), StackSpan(b, t + 0.1, opt)]
        t += 0.1
    sess.spans = spans
    sess.source.update(SOURCE)
    sess.source[(TRAIN, 41)] = "logits = model(x)"
    sess.source[(TRAIN, 42)] = "optimizer.step()"
    return sess


def test_a_wait_on_a_child_process_every_step_is_a_blocking_wait() -> None:
    found = analyze(per_step(0.4, CHILD))[1].findings
    assert "loop-overhead" not in [f.id for f in found]  # a wait is no host CPU work
    (f,) = [f for f in found if f.id == "blocking-stall"]
    assert f.where == f"{TRAIN}:12 (helper)"
    assert dict(f.claimed).get("idle", 0) > 0, f.claimed  # the wait is its cost
    assert f.impact is not None and f.impact > 0.35
    joined = " ".join(f.evidence)
    assert "waiting for a child process" in joined and "every step" in f.title
    assert "subprocess.run(" in joined  # the line, quoted
    assert f.fix[0].startswith("run it once at start-up")  # the call's own fix


def test_a_socket_wait_every_step_gets_the_networks_fix() -> None:
    (f,) = [f for f in analyze(per_step(0.3, HTTP))[1].findings if f.id == "blocking-stall"]
    assert "waiting on the network" in f.title
    assert f.where == f"{TRAIN}:40 (helper)"


def test_numpy_in_a_custom_function_is_named_with_its_line_not_as_the_model() -> None:
    (f,) = [
        f for f in analyze(per_step(0.5, FUNCTION_NUMPY))[1].findings if f.id == "loop-overhead"
    ]
    assert f.where == f"{TRAIN}:20 (FakeQuant.forward)"
    joined = " ".join(f.evidence)
    assert "numpy on the host" in joined and "inside the model's forward" in joined
    assert "torch operators" in f.fix[0]
    assert "idle" not in dict(f.claimed)  # no wait: its cost is the CPU work alone


def test_a_short_wait_every_step_is_not_a_finding() -> None:
    assert "blocking-stall" not in {f.id for f in analyze(per_step(0.03, CHILD))[1].findings}


def test_a_stall_formatting_a_tensor_into_a_log_is_logging() -> None:
    """Every 30th step stalls 0.2 s in ``log.debug`` formatting a tensor: logging-overhead
    names it, every 30 steps, at the logging line; no cpu-stall."""
    sess = session(periodic(300, 0.02, 30, 0.2))
    log = sess.processes[0]
    spans, end = [], log.t0
    for t_us, d_us in zip(log.steps["t"], log.steps["dur"], strict=True):
        t1 = log.t0 + t_us / 1e6
        if d_us > 3 * 20_000 and t_us > 2_000_000:
            spans.append(StackSpan(end, t1 - 0.02, TENSOR_LOG))
            end = t1 - 0.02
        spans.append(StackSpan(end, t1, (*LOOP[:1], ("main", TRAIN, 41), MODULE)))
        end = t1
    sess.spans = spans
    sess.source.update(SOURCE)
    found = analyze(sess)[1].findings
    ids = [f.id for f in found]
    assert "cpu-stall" not in ids, ids
    (f,) = [f for f in found if f.id == "logging-overhead"]
    assert "every 30 steps" in f.title
    assert f.where is not None and f.where.startswith(f"{TRAIN}:")


def test_a_stall_waiting_on_a_lock_is_blocking_with_the_locks_fix() -> None:
    """Every 30th step waits 0.2 s at ``with self.lock:`` while another thread holds it: a
    blocking stall, said to wait on a lock, with that kind's fix (the table knows no call)."""
    sess = session(periodic(300, 0.02, 30, 0.2))
    log = sess.processes[0]
    spans, end = [], log.t0
    for t_us, d_us in zip(log.steps["t"], log.steps["dur"], strict=True):
        t1 = log.t0 + t_us / 1e6
        if d_us > 3 * 20_000 and t_us > 2_000_000:
            spans.append(StackSpan(end, t1 - 0.02, (*LOOP, at(23))))
            end = t1 - 0.02
        spans.append(StackSpan(end, t1, (*LOOP[:1], ("main", TRAIN, 41), MODULE)))
        end = t1
    sess.spans = spans
    sess.source.update(SOURCE)
    found = analyze(sess)[1].findings
    (f,) = [f for f in found if f.id == "blocking-stall"]
    assert "waiting on a lock" in " ".join(f.evidence)
    assert f.fix[0].startswith(work_kind.FIX[work_kind.WAIT_LOCK])


def test_a_hooks_own_numpy_line_before_backward_stays_host_work() -> None:
    """A hook's line that calls numpy's C code itself (``np.mean(c**4)``: no numpy frame) runs
    before the step's backward call, inside the model's call: host work, not the forward."""
    from trainprof.analysis.attribution import profile

    hook = (*LOOP[:1], ("main", TRAIN, 41), MODULE, at(20, "activation_stats"))
    backward = (*LOOP[:1], ("main", TRAIN, 43), BACKWARD)
    source = {**SOURCE, (TRAIN, 41): "logits = model(x)", (TRAIN, 43): "loss.backward()"}
    spans = [StackSpan(i * 0.01, (i + 1) * 0.01, f) for i, f in enumerate((hook, hook, backward))]
    prof = profile(spans, source, 0.0, 1.0)
    assert round(prof.seconds.get("other", 0.0), 3) == 0.02, prof.seconds


def test_numpy_in_a_custom_function_called_from_the_loop_is_host_work() -> None:
    """``SmoothRank.apply(scores)`` on the loop's line, before its backward call: the
    Function's numpy (its own ``np.exp`` line, no numpy frame) is host work, not the forward."""
    from trainprof.analysis.attribution import profile

    function = (
        *LOOP[:1],
        ("main", TRAIN, 41),
        ("apply", f"{SITE}/torch/autograd/function.py", 575),
        ("SmoothRank.forward", TRAIN, 55),
        at(20, "soft_rank_np"),
    )
    backward = (*LOOP[:1], ("main", TRAIN, 43), BACKWARD)
    source = {
        **SOURCE,
        (TRAIN, 41): "ranks = SmoothRank.apply(scores)",
        (TRAIN, 43): "loss.backward()",
    }
    spans = [StackSpan(i * 0.01, (i + 1) * 0.01, f) for i, f in enumerate((function, backward))]
    prof = profile(spans, source, 0.0, 1.0)
    assert round(prof.seconds.get("other", 0.0), 3) == 0.01, prof.seconds


@pytest.mark.parametrize("root", ["/home/user/trainprof", "/home/user/proj"])
def test_numpy_inside_the_forward_is_host_work_wherever_the_venv_lies(root: str) -> None:
    """numpy's own frames in a venv under a folder named ``trainprof`` (a clone of trainprof,
    CI's) are numpy, not trainprof's probe: host work, wherever the folder is."""
    numpy = ("percentile", f"{root}/.venv/lib/python3.11/site-packages/numpy/lib/_fb.py", 4100)
    frames = (*LOOP, MODULE, at(20, "FakeQuant.forward"), numpy)
    assert work_kind.is_host(frames, SOURCE)
    assert category(frames, SOURCE) == "other"
