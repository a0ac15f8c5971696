"""A torchrun rank that fails: torchrun's failure report parsed, the failed rank named with its
exit code or signal and its own error, and the other ranks' errors named as consequences.
The texts are torchrun 2.x's own (a real run's, paths shortened); the real run is in
tests/integration/test_distributed.py."""

from __future__ import annotations

import json

from synth import process, session

from trainprof.analysis.crash.torchrun import parse_failures, rank_outputs
from trainprof.analysis.crash.verdict import torchrun_failure as rank_failed
from trainprof.analysis.findings import Finding
from trainprof.analysis.pipeline import analyze
from trainprof.store.session import Session

RANK1_RAISES = """\
[rank1]: Traceback (most recent call last):
[rank1]:   File "/home/u/proj/train.py", line 50, in <module>
[rank1]:     main()
[rank1]:   File "/home/u/proj/train.py", line 42, in main
[rank1]:     for x, y in loader:
[rank1]:   File "/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py", line 725, in __next__
[rank1]:     data = self._next_data()
[rank1]:   File "/home/u/proj/train.py", line 27, in __getitem__
[rank1]:     raise ValueError(f"corrupt record {i}: checksum mismatch")
[rank1]: ValueError: corrupt record 7989: checksum mismatch
[rank0]: Traceback (most recent call last):
[rank0]:   File "/home/u/proj/train.py", line 44, in main
[rank0]:     nn.functional.cross_entropy(model(x), y).backward()
[rank0]:   File "/venv/lib/python3.11/site-packages/torch/autograd/graph.py", line 979, in _engine_run_backward
[rank0]:     return Variable._execution_engine.run_backward(
[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:48013. This is typically caused by a remote worker crashing.
W1126 06:45:53.685000 23388 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 23397 closing signal SIGTERM
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-26_06:45:53
  host      : node-a
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 23397)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 23397
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-26_06:45:53
  host      : node-a
  rank      : 1 (local_rank: 1)
  exitcode  : 1 (pid: 23398)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""

OOM_KILLED = """\
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-05-02_10:11:12
  host      : gpu-node-7
  rank      : 5 (local_rank: 1)
  exitcode  : -9 (pid: 4242)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 4242
============================================================
"""


def failed_job(
    stderr: str, errors: dict[int, tuple[str, str, int]], ended: frozenset[int] = frozenset()
) -> Session:
    """Ranks whose probe recorded the exception that ended them: rank → (type, msg, t µs);
    ``ended``: the ranks whose exit handlers ran (the probe's records it)."""
    logs = []
    for rank in (0, 1):
        log = process(30, pid=3000 + rank)
        log.header.update(role="rank", rank=rank, local_rank=rank, world_size=2)
        if rank in errors:
            typ, msg, t = errors[rank]
            log.add_line("X " + json.dumps({"t": t, "exception": typ, "message": msg}))
        if rank in ended:
            log.add_line("X " + json.dumps({"t": 9_000_000, "at_exit": True}))
        logs.append(log)
    sess = session(*logs, exit_code=1)
    sess.stderr_tail = stderr
    return sess


def found(stderr: str, errors: dict[int, tuple[str, str, int]]) -> tuple[Finding, int]:
    """The rank-failed finding for that job, and the rank it names (there must be one)."""
    result = rank_failed(failed_job(stderr, errors))
    assert result is not None
    return result


RANK1_CORRUPT = {
    1: ("ValueError", "corrupt record 7989: checksum mismatch", 4_000_000),
    0: ("RuntimeError", "[pair.cc:553] Connection closed by peer [127.0.0.1]:1", 4_100_000),
}


def test_torchruns_failure_report_is_parsed_with_its_root_cause() -> None:
    failures = parse_failures(RANK1_RAISES)
    assert [(f.rank, f.exitcode, f.root) for f in failures] == [(0, -15, False), (1, 1, True)]
    root = failures[1]
    assert (root.local_rank, root.pid, root.host) == (1, 23398, "node-a")
    assert failures[0].how == "was killed by SIGTERM (exit code -15)"
    assert root.how == "exited with code 1"
    assert [f.rank for f in parse_failures(OOM_KILLED)] == [5]


def test_each_ranks_output_is_its_own() -> None:
    out = rank_outputs(RANK1_RAISES)
    assert set(out) == {0, 1}
    assert out[1].splitlines()[-1] == "ValueError: corrupt record 7989: checksum mismatch"


def test_the_failed_rank_is_named_with_its_exit_code_its_error_and_the_others_consequences() -> (
    None
):
    _, verdict = analyze(failed_job(RANK1_RAISES, RANK1_CORRUPT))
    f = verdict.findings[0]
    assert f.id == "rank-failed" and f.severity == "error"
    assert f.title == (
        "Rank 1 exited with code 1: ValueError: corrupt record 7989: checksum mismatch"
    )
    assert f.where == "/home/u/proj/train.py:27 (__getitem__)"
    text = "\n".join(f.evidence)
    assert "torchrun's Root Cause: rank 1 (local_rank 1, pid 23398, host node-a" in text
    assert "rank 0: RuntimeError: Connection closed by peer [127.0.0.1]:1" in text
    assert "(a consequence: rank 1 was gone)" in text
    assert f.fix[0].startswith("fix rank 1's own error first")


def test_the_first_own_error_is_the_cause_even_when_torchrun_observed_another_rank_first() -> None:
    text = RANK1_RAISES.replace("rank      : 1 (local", "rank      : 9 (local")
    f, rank = found(
        text,
        {
            0: ("RuntimeError", "NCCL watchdog: Watchdog caught collective operation timeout", 9),
            1: ("KeyError", "'label'", 5_000_000),
        },
    )
    assert rank == 1 and f.title.startswith("Rank 1 failed: KeyError")
    assert any("torchrun observed rank 9 first" in e for e in f.evidence)


def test_a_rank_that_raised_and_was_then_sigtermed_failed_by_its_error() -> None:
    """A clean-clone CI run: rank 1 raised, rank 0 lost its peer and exited first, and torchrun
    SIGTERMed rank 1 while it was still exiting: its error ended it, not the signal."""
    report = RANK1_RAISES[: RANK1_RAISES.index("Failures:")]
    text = report + (
        "Failures:\n[1]:\n  time      : 2026-11-26_06:45:53\n  host      : node-a\n"
        "  rank      : 1 (local_rank: 1)\n  exitcode  : -15 (pid: 23398)\n"
        "  traceback : Signal 15 (SIGTERM) received by PID 23398\n"
        "------------------------------------------------------------\n"
        "Root Cause (first observed failure):\n[0]:\n  time      : 2026-11-26_06:45:53\n"
        "  host      : node-a\n  rank      : 0 (local_rank: 0)\n  exitcode  : 1 (pid: 23397)\n"
        "============================================================\n"
    )
    assert [(f.rank, f.exitcode, f.root) for f in parse_failures(text)] == [
        (1, -15, False),
        (0, 1, True),
    ]
    f, rank = found(text, RANK1_CORRUPT)
    assert rank == 1
    assert f.title == "Rank 1 failed: ValueError: corrupt record 7989: checksum mismatch"
    text = "\n".join(f.evidence)
    assert (
        "rank 1 (local_rank 1, pid 23398, host node-a, 2026-11-26_06:45:53) was killed by" in text
    )
    assert "had raised its error and was still exiting when torchrun" in text
    assert "torchrun observed rank 0 first, but its error is a consequence" in text


def test_a_rank_that_raised_and_then_aborted_while_exiting_failed_by_its_error() -> None:
    """A clean-clone CI run (and 1 of 8 plain torchrun runs of dist_rank_fails): rank 1 raised,
    then gloo aborted it as Python shut down with its process group alive."""
    text = RANK1_RAISES.replace("exitcode  : 1 (pid: 23398)", "exitcode  : -6 (pid: 23398)")
    assert (1, -6, True) in [(f.rank, f.exitcode, f.root) for f in parse_failures(text)]
    f, rank = found(text, RANK1_CORRUPT)
    assert rank == 1
    assert f.title == "Rank 1 failed: ValueError: corrupt record 7989: checksum mismatch"
    evidence = "\n".join(f.evidence)
    assert "rank 1 had raised its error and died of SIGABRT (exit code -6) while exiting" in (
        evidence
    )


def test_a_rank_killed_by_sigkill_points_at_memory() -> None:
    f, rank = found(OOM_KILLED, {})
    assert rank == 5 and f.title == "Rank 5 was killed by SIGKILL (exit code -9)"
    assert any("OOM killer" in e for e in f.evidence)
    assert "OOM killer" in f.fix[0]


def test_a_job_whose_ranks_did_not_fail_has_no_rank_failure() -> None:
    sess = failed_job("", {})
    sess.meta["exit_code"] = 0
    assert rank_failed(sess) is None
    caught = failed_job("", {0: ("ValueError", "caught and logged", 5)})
    caught.meta["exit_code"] = 0
    assert rank_failed(caught) is None


# A real run's (torch 2.13, gloo, paths shortened): both ranks' training ended, then gloo's
# worker thread aborted rank 0 as the interpreter shut down; torchrun SIGTERMed rank 1.
ABORT_AT_EXIT = """\
terminate called without an active exception
W1126 21:34:09.037000 1264 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 1270 closing signal SIGTERM
E1126 21:34:09.073000 1264 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -6) local_rank: 0 (pid: 1269) of binary: /venv/bin/python
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
======================================================
train.py FAILED
------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-26_21:34:09
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -15 (pid: 1270)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 1270
------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-26_21:34:09
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : -6 (pid: 1269)  (SIGABRT)
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID 1269
======================================================
"""


def test_a_rank_aborted_after_its_script_ended_died_in_its_shutdown_not_in_its_training() -> None:
    f, rank = found_ended(ABORT_AT_EXIT, frozenset({0, 1}))
    assert rank == 0
    assert f.title == "Rank 0 was killed by SIGABRT (exit code -6) after its script ended"
    text = "\n".join(f.evidence)
    assert "its exit handlers had run (30 steps recorded)" in text
    assert "'terminate called without an active exception': the C++ runtime aborted" in text
    assert "came from outside" not in text
    assert "rank 1: was killed by SIGTERM (exit code -15) (a consequence" in text
    assert "training ran to its end" in f.fix[0] and "destroy_process_group" in f.fix[0]
    assert "time.sleep(0.1) after the last collective" in f.fix[1]


def test_ranks_that_all_aborted_at_shutdown_are_not_each_others_consequences() -> None:
    both = ABORT_AT_EXIT.replace("-15 (pid: 1270)  (SIGTERM)", "-6 (pid: 1270)  (SIGABRT)")
    f, rank = found_ended(both, frozenset({0, 1}))
    assert rank == 0  # torchrun's root cause, of the two
    assert "rank 1: was killed by SIGABRT (exit code -6) after its script ended, the same way" in (
        f.evidence
    )


def test_an_abort_before_the_script_ended_is_not_called_a_shutdown_crash() -> None:
    f, rank = found_ended(ABORT_AT_EXIT, frozenset())
    assert rank == 0 and f.title == "Rank 0 was killed by SIGABRT (exit code -6)"
    assert not any("exit handlers" in e for e in f.evidence)
    assert any("the C++ runtime aborted the process" in e for e in f.evidence)
    assert f.fix[0].startswith("fix rank 0's own error first")
    # without the runtime's words, SIGABRT is still the process's own abort(), not an outsider
    f, _ = found_ended(ABORT_AT_EXIT.replace("terminate called", "it ended"), frozenset())
    assert any("SIGABRT is what a process's own abort() raises" in e for e in f.evidence)


def found_ended(stderr: str, ended: frozenset[int]) -> tuple[Finding, int]:
    result = rank_failed(failed_job(stderr, {}, ended))
    assert result is not None
    return result
