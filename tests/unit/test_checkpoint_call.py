"""The whole call that saves a checkpoint is the checkpoint's cost: a save_checkpoint() that
writes with torch.save, then fsyncs and copies the file, stalls training for all of it. It was
called a CPU stall ("vectorise it"), with only the torch.save part (6 %) as the checkpoint's."""

from __future__ import annotations

from synth import session
from test_rule_thresholds import periodic

from trainprof.analysis.attribution import dominant_user_frame, save_caller
from trainprof.analysis.findings import Finding
from trainprof.analysis.pipeline import analyze
from trainprof.store.session import Session
from trainprof.store.stacks import StackSpan

TRAIN = "/home/user/proj/train.py"
TORCH = "/venv/site-packages/torch"
SAVE_S = 0.02  # torch.save's own share of each 0.2 s stall


def saving(rest_in_save_call: bool) -> Session:
    """300 steps of 20 ms; every 30th stalls 0.2 s: torch.save for 20 ms, then 180 ms of
    fsync and copy, in save_checkpoint() or (``rest_in_save_call`` False) in another call."""
    log = periodic(300, 0.02, 30, 0.2)
    sess = session(log)
    forward = ("Module._call_impl", f"{TORCH}/nn/modules/module.py", 1)
    backward = ("backward", f"{TORCH}/autograd/__init__.py", 1)
    spans, end = [], log.t0
    for t_us, d_us in zip(log.steps["t"], log.steps["dur"], strict=True):
        t1 = log.t0 + t_us / 1e6
        if d_us > 3 * 20_000 and t_us > 2_000_000:
            start = t1 - d_us / 1e6
            log.add_line(
                f'C {int((start - log.t0 + SAVE_S) * 1e6)} {int(SAVE_S * 1e6)} 1000 "/c.pt"'
            )
            save = (("<module>", TRAIN, 1), ("main", TRAIN, 14), ("save_checkpoint", TRAIN, 40))
            spans.append(
                StackSpan(start, start + SAVE_S, (*save, ("save", f"{TORCH}/serialization.py", 1)))
            )
            rest = (
                save
                if rest_in_save_call
                else (save[0], ("main", TRAIN, 15), ("publish", TRAIN, 50))
            )
            for k, line in enumerate((42, 43) * 9):
                a = start + SAVE_S + k * 0.01
                spans.append(StackSpan(a, a + 0.01, (*rest[:-1], (rest[-1][0], TRAIN, line))))
            end = start + SAVE_S + 0.18
        mid = (end + t1) / 2
        spans.append(StackSpan(end, mid, (("<module>", TRAIN, 1), ("main", TRAIN, 11), forward)))
        spans.append(StackSpan(mid, t1, (("<module>", TRAIN, 1), ("main", TRAIN, 12), backward)))
        end = t1
    sess.source.update(
        {
            (TRAIN, 11): "loss = model(x)",
            (TRAIN, 12): "loss.backward()",
            (TRAIN, 14): "save_checkpoint(model, path)",
            (TRAIN, 15): "publish(path)",
            (TRAIN, 40): "torch.save(model.state_dict(), f)",
            (TRAIN, 42): "os.fsync(f.fileno())",
            (TRAIN, 43): "shutil.copy(path, latest)",
        }
    )
    sess.spans = spans
    return sess


def first(sess: Session) -> Finding:
    return next(f for f in analyze(sess)[1].findings if f.severity != "info")


def test_the_rest_of_the_save_call_is_the_checkpoints() -> None:
    f = first(saving(True))
    assert f.id == "checkpoint-stall", f
    assert f.where is not None and f.where.endswith("(save_checkpoint)")
    claimed = dict(f.claimed)
    assert abs(claimed["save"] - 9 * 0.2) < 0.05, claimed  # the whole stall, not 9 × 20 ms


def test_work_in_another_call_after_a_save_is_not_the_checkpoints() -> None:
    ids = [f.id for f in analyze(saving(False))[1].findings]
    assert "cpu-stall" in ids or "blocking-stall" in ids, ids


def test_the_save_is_placed_in_the_function_that_calls_the_writer() -> None:
    """Saves of 25 ms sampled every 25 ms: the optimizer step's sample before each save spans
    most of its window. The `where` is read from the stacks inside torch.save (blind set C's
    rolling checkpointer was placed at the loop's `opt.step()`)."""
    opt_step = (
        ("<module>", TRAIN, 1),
        ("train", TRAIN, 101),
        ("step", f"{TORCH}/optim/adam.py", 1),
    )
    saving_ = (
        ("<module>", TRAIN, 1),
        ("train", TRAIN, 110),
        ("Checkpointer.save", TRAIN, 60),
        ("save", "/venv/site-packages/trainprof/probe/saves.py", 40),
        ("save", f"{TORCH}/serialization.py", 1),
    )
    spans, windows = [], []
    for k in range(10):
        t = k * 1.0
        spans.append(StackSpan(t, t + 0.040, opt_step))  # sampled 15 ms before the save began
        spans.append(StackSpan(t + 0.040, t + 0.065, saving_))
        windows.append((t + 0.025, t + 0.050))
    assert dominant_user_frame(spans, windows) == ("train", TRAIN, 101)  # the windows' edges
    assert save_caller(spans, windows) == ("Checkpointer.save", TRAIN, 60)
