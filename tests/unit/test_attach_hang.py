"""attach's hang verdict from what moved in the window: a job whose every sampled process held
one stack and that read and wrote nothing is hung (first, and the rules that judge how the loop
spends its time stand aside); one whose stacks move, or that reads or writes, or that was
sampled too briefly, is not; still but using CPUs, it is stuck (a warning). The DataLoader
workers' side runs for real in tests/integration/test_attach.py."""

from __future__ import annotations

from typing import Any

from synth import session

from trainprof.analysis.findings import Verdict
from trainprof.analysis.pipeline import analyze
from trainprof.analysis.rules import hang as hang_rule
from trainprof.store import sampled
from trainprof.store.session import Session
from trainprof.store.stacks import StackSpan

TRAIN = "/home/user/proj/train.py"
TORCH = "/venv/site-packages/torch"
WAITING = (
    ("<module>", TRAIN, 30),
    ("sync_barrier", TRAIN, 12),
    ("wait", "/usr/lib/python3.11/threading.py", 320),
)
FORWARD = (("<module>", TRAIN, 20), ("Module._call_impl", f"{TORCH}/nn/modules/module.py", 1))
BACKWARD = (("<module>", TRAIN, 22), ("backward", f"{TORCH}/autograd/__init__.py", 1))
LOADER = (
    ("<module>", TRAIN, 18),
    ("_MultiProcessingDataLoaderIter._next_data", f"{TORCH}/utils/data/dataloader.py", 1),
    ("_MultiProcessingDataLoaderIter._get_data", f"{TORCH}/utils/data/dataloader.py", 2),
)


def attached(
    spans: list[StackSpan],
    io: list[Any] | None = None,
    cpu: float = 0.0,
    exited: bool = False,
    rss_rise: float = 0.0,
    worker_fds: int | None = None,
    files: dict[str, list[StackSpan]] | None = None,
    **record: Any,
) -> Session:
    """An attach run of pid 1000: its main thread's ``spans``, its reads and writes at the
    window's start and end (``io``), its CPU use in % of one CPU at each host sample (a second
    apart), its RSS rising ``rss_rise`` bytes a second; with ``worker_fds``, a DataLoader worker
    (pid 1001, held in torch's worker loop) with that many descriptors open under a limit of
    128. ``record``: more of run.json's attach record (``targets``, ``workers``), whose stack
    files the store reads from ``files``."""
    att: dict[str, Any] = {"pid": 1000, "rate_hz": 100, **record}
    if io is not None:
        att["io_bytes"] = io
    if exited:
        att["target_exit"] = "exited during sampling, after 3.0 s"
    procs: list[dict[str, Any]] = [{"pid": 1000, "rss": 1e8, "cpu": cpu, "nofile": [128, 4096]}]
    if worker_fds is not None:
        procs.append(
            {"pid": 1001, "rss": 1e8, "cpu": 0.0, "fds": worker_fds, "nofile": [128, 4096]}
        )
    rows = [
        {"t": float(t), "procs": [dict(p, rss=p["rss"] + rss_rise * t) for p in procs]}
        for t in range(int(spans[-1].t1) + 1)
    ]
    sess = session(attach=att, sample_rows=rows)
    sess.spans = spans
    stored = files or {}
    sess.sampled = sampled.read(att, sess.run_dir, lambda name, _t0: stored.get(name, []))
    return sess


def held(frames: tuple[tuple[str, str, int], ...], seconds: float) -> list[StackSpan]:
    """One stack held for ``seconds``, as py-spy records it with a torn sample now and then."""
    out, t = [], 0.0
    while t < seconds:
        out.append(StackSpan(t, min(seconds, t + 1.0), frames))
        t += 1.0
    return out


def stepping(seconds: float) -> list[StackSpan]:
    out, t = [], 0.0
    while t < seconds:
        for frames in (LOADER, FORWARD, BACKWARD):
            out.append(StackSpan(t, t + 0.01, frames))
            t += 0.01
    return out


def verdict(sess: Session) -> Verdict:
    return analyze(sess)[1]


def test_a_job_that_held_one_stack_and_moved_nothing_is_hung_at_its_line() -> None:
    v = verdict(attached(held(WAITING, 8.0), io=[5000, 5000]))
    first = v.findings[0]
    assert first.id == "hang" and first.severity == "error", v.findings
    assert first.title == (
        "The job looks hung: nothing moved in the 8.0 s sampled: the main process is blocked "
        "in sync_barrier()"
    )
    assert first.where == f"{TRAIN}:12 (sync_barrier)"
    assert "it read and wrote nothing in that time; its memory kept its size" in first.evidence[0]
    assert "0% of a CPU" in first.evidence[0], first.evidence
    assert any("blocked in wait(), called from" in e for e in first.evidence), first.evidence


def test_waiting_for_a_batch_is_the_hang_not_input_bound() -> None:
    """A main thread held in the DataLoader for the whole window (the workers it waits on were
    not sampled here): a hang; input-bound, which would advise more workers, stands aside."""
    v = verdict(attached(held(LOADER, 8.0), io=[0, 0]))
    assert [f.id for f in v.findings] == ["hang"], v.findings
    assert "waits for a batch no worker delivers" in v.findings[0].title
    assert "input-bound" in {s.id for s in v.skipped}


def test_the_rate_of_a_held_stack_says_why_there_is_none() -> None:
    """Not "no autocorrelation peak (the highest is 0.00)": one stack held, no step to time."""
    m, _v = analyze(attached(held(WAITING, 8.0), io=[0, 0]))
    assert m.outside is not None
    assert m.outside.rate.reason == (
        "the main thread held one stack for 100% of the 8.0 s sampled: no step to time"
    )


def test_a_moving_stack_or_reads_and_writes_are_work() -> None:
    assert "hang" not in {f.id for f in verdict(attached(stepping(8.0), io=[0, 0])).findings}
    # still, but writing: a checkpoint written in one long call
    writes = attached(held(WAITING, 8.0), io=[0, int(hang_rule.MOVED.value)])
    assert "hang" not in {f.id for f in verdict(writes).findings}
    # still, reading and writing nothing, but allocating: one native call filling a buffer
    moved = hang_rule.MOVED.value
    allocates = attached(held(WAITING, 8.0), io=[0, 0], rss_rise=moved / 8)
    assert "hang" not in {f.id for f in verdict(allocates).findings}
    barely = attached(held(WAITING, 8.0), io=[0, 0], rss_rise=moved / 9)
    assert "hang" in {f.id for f in verdict(barely).findings}


def test_a_short_window_or_a_job_that_exited_is_not_judged() -> None:
    short = hang_rule.ATTACH_STILL_S.value - 0.5
    assert "hang" not in {f.id for f in verdict(attached(held(WAITING, short))).findings}
    assert "hang" not in {f.id for f in verdict(attached(held(WAITING, 8.0), exited=True)).findings}


def test_one_stack_held_but_less_than_the_share_is_not_still() -> None:
    spans = held(WAITING, 8.0)
    share = hang_rule.ATTACH_HELD.value
    # the rest of the window in a second stack, just over what a still job may show
    other = StackSpan(8.0, 8.0 + 8.0 * (1 - share) / share + 0.1, FORWARD)
    assert "hang" not in {f.id for f in verdict(attached([*spans, other])).findings}
    almost = StackSpan(8.0, 8.0 + 8.0 * (1 - share) / share - 0.1, FORWARD)
    assert "hang" in {f.id for f in verdict(attached([*spans, almost])).findings}


def test_still_but_busy_is_stuck_a_warning() -> None:
    """A spin-wait keeps one line on the stack and a CPU busy: stuck, said as a warning (one
    long native call looks the same)."""
    v = verdict(attached(held(WAITING, 8.0), io=[0, 0], cpu=100.0))
    first = v.findings[0]
    assert first.id == "hang" and first.severity == "warning", v.findings
    assert first.title.startswith("The job looks stuck: no stack moved in the 8.0 s sampled")
    assert "busy in sync_barrier()" in first.title
    assert any("one long native call" in e for e in first.evidence), first.evidence


def test_unread_io_counters_are_said_not_taken_for_nothing() -> None:
    first = verdict(attached(held(WAITING, 8.0), io=[None, 7])).findings[0]
    assert first.id == "hang"
    assert "could not be read" in first.evidence[0], first.evidence


def test_a_worker_out_of_descriptors_is_named_with_the_limit_to_raise() -> None:
    """hang_fd_limit under attach: a worker had all the descriptors its limit allows open, the
    main process waits for the batch it could not send. The title names it, the first fix
    raises the limit (up to the hard one, which needs no root)."""
    # forked: below torch's worker loop, the parent's frames (the loop's line)
    worker = held(
        (
            *LOADER[:1],
            ("_worker_loop", f"{TORCH}/utils/data/_utils/worker.py", 1),
            ("select", "/usr/lib/python3.11/selectors.py", 415),
        ),
        8.0,
    )
    traced = {
        "files": {"stacks-1001.json": worker},
        "workers": [{"pid": 1001, "parent": 1000, "file": "stacks-1001.json"}],
    }
    v = verdict(attached(held(LOADER, 8.0), io=[0, 0], worker_fds=128, **traced))
    first = v.findings[0]
    assert first.title.endswith("a DataLoader worker ran out of file descriptors (ulimit -n 128)")
    assert any("(pid 1001) had 128 file descriptors open" in e for e in first.evidence)
    assert first.fix[0].startswith(
        "restart the job with a higher open-file limit: `ulimit -n 4096`"
    )
    below = verdict(attached(held(LOADER, 8.0), io=[0, 0], worker_fds=127, **traced))
    assert "file descriptors" not in below.findings[0].title


def test_each_ranks_rate_of_a_held_stack_says_why_there_is_none() -> None:
    """A torchrun job hung in two collectives, attached: each rank's iterations row says its
    stack was held (it said "no autocorrelation peak"); a rank that still steps keeps its
    own reason."""
    other = (("<module>", TRAIN, 30), ("sync_barrier", TRAIN, 14), WAITING[2])
    targets = [
        {"pid": 1000, "rank": 0, "file": "stacks-1000.json"},
        {"pid": 1002, "rank": 1, "file": "stacks-1002.json"},
        {"pid": 1004, "rank": 2, "file": "stacks-1004.json"},
    ]
    files = {
        "stacks-1000.json": held(WAITING, 8.0),
        "stacks-1002.json": held(other, 8.0),
        "stacks-1004.json": stepping(8.0),
    }
    sess = attached(held(WAITING, 8.0), io=[0, 0], files=files, targets=targets)
    m, _v = analyze(sess)
    assert m.outside is not None
    reasons = [r.rate.reason for r in m.outside.ranks]
    said = "the main thread held one stack for 100% of the 8.0 s sampled: no step to time"
    assert reasons[:2] == [said, said], reasons
    assert reasons[2] != said, reasons
