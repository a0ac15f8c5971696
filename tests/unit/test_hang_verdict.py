"""The hang verdict tells the stories apart from the stacks the runner kept: workers alive but
blocked in user code, a worker lost, the main process blocked in its own code, or compiling."""

from __future__ import annotations

from synth import process, session

from trainprof.analysis.crash.hang import hang_finding
from trainprof.analysis.from_steps import compute
from trainprof.store.dumps import parse

PY = "/usr/lib/python3.11"
TORCH = "/venv/site-packages/torch"
TRAIN = "/home/user/proj/train.py"

MAIN_IN_LOADER = f"""=== pid 100 (python) ===
Process 100: python train.py
Python v3.11.7 (/usr/bin/python3.11)

Thread 100 (idle): "MainThread"
    _PollLikeSelector.select ({PY}/selectors.py:415)
    Queue.get ({PY}/multiprocessing/queues.py:113)
    _MultiProcessingDataLoaderIter._get_data ({TORCH}/utils/data/dataloader.py:1464)
    _BaseDataLoaderIter.__next__ ({TORCH}/utils/data/dataloader.py:725)
    main ({TRAIN}:113)
    <module> ({TRAIN}:124)
"""


def worker(pid: int, user_line: bool) -> str:
    frames = f"    Condition.wait ({PY}/threading.py:327)\n"
    if user_line:
        frames += f"    Shards.__getitem__ ({TRAIN}:86)\n"
    frames += (
        f"    _MapDatasetFetcher.fetch ({TORCH}/utils/data/_utils/fetch.py:54)\n"
        f"    _worker_loop ({TORCH}/utils/data/_utils/worker.py:374)\n"
        f"    main ({TRAIN}:113)\n"
    )
    return f'=== pid {pid} (pt_data_worker) ===\nThread {pid} (idle): "MainThread"\n{frames}'


HANG = {"silent_s": 10.2, "steps_before": 20, "unit": "optimizer step", "stacks_file": "h.txt"}


def verdict(
    text: str, hang: dict[str, object] = HANG, roles: dict[int, str] | None = None
) -> tuple[str, str | None, list[str]]:
    m = compute(session(process(40)))
    f = hang_finding(hang, parse(text), roles or {}, m)
    return f.title, f.where, list(f.evidence) + list(f.fix)


AGENT = f"""=== pid 90 (pt_elastic) ===
Thread 90 (idle): "MainThread"
    _invoke_run ({TORCH}/distributed/elastic/agent/server/api.py:923)
    main ({TORCH}/distributed/run.py:900)
    <module> (/venv/bin/torchrun:6)
"""


def rank(pid: int, *frames: str) -> str:
    body = "".join(f"    {f}\n" for f in frames)
    return f'=== pid {pid} (python) ===\nThread {pid} (idle): "MainThread"\n{body}'


IN_BACKWARD = (
    f"_engine_run_backward ({TORCH}/autograd/graph.py:841)",
    f"backward ({TORCH}/autograd/__init__.py:353)",
    f"main ({TRAIN}:60)",
)
RANKS = {90: "main", 100: "rank 0", 101: "rank 1"}


def test_workers_alive_and_blocked_in_user_code_are_quoted() -> None:
    title, where, text = verdict(MAIN_IN_LOADER + worker(101, True) + worker(102, True))
    assert "2 DataLoader workers alive but blocked in user code (__getitem__)" in title
    assert where == f"{TRAIN}:86 (Shards.__getitem__)"
    assert sum(f"{TRAIN}:86" in line for line in text if line.startswith("worker")) == 2
    assert not any("ulimit" in line for line in text)


def test_a_lost_worker_is_told_apart_from_blocked_ones() -> None:
    title, _where, text = verdict(
        MAIN_IN_LOADER + "=== pid 101 (python) ===\nError: No such process\n"
    )
    assert "waits for a batch no worker delivers (0 of 2 workers alive)" in title
    assert any("ulimit -n" in line for line in text)


def test_workers_waiting_in_torchs_loop_are_not_blocked_in_the_code_that_forked_them() -> None:
    """hang_fd_limit's workers wait in torch's worker loop for indices (the batch they made was
    lost when its descriptors ran out); below the loop their stacks hold the parent's frames,
    copied by fork: the training loop's line. They were called "blocked in user code (main)",
    quoting that line as where they wait."""
    title, where, text = verdict(MAIN_IN_LOADER + worker(101, False) + worker(102, False))
    assert title.endswith("the main process waits for a batch no worker delivers"), title
    assert where == f"{TRAIN}:113 (main)"
    quotes = [line for line in text if line.startswith("worker")]
    assert len(quotes) == 2 and all(
        "in torch's worker loop, waiting for indices" in q for q in quotes
    )
    assert any("ulimit -n" in line for line in text)


def test_a_rank_outside_the_collective_is_named_not_torchruns_agent() -> None:
    """Rank 1 sleeps in its own code while rank 0 waits in backward (DDP's all-reduce): the
    odd rank out is named; torchrun's agent, a Python process above them waiting in its own
    loop, is not the main process (it was: "blocked in <module>()" at torchrun's line)."""
    dump = (
        AGENT
        + rank(100, *IN_BACKWARD)
        + rank(101, f"wait_for_peer ({TRAIN}:44)", f"main ({TRAIN}:58)")
    )
    title, where, text = verdict(dump, roles=RANKS)
    assert title.endswith("the ranks stopped at different lines (rank 1 in wait_for_peer())")
    assert where == f"{TRAIN}:44 (wait_for_peer)"
    assert any(t.startswith("rank 0 (pid 100) blocked in _engine_run_backward()") for t in text)
    assert not any("torchrun" in t or "_invoke_run" in t for t in text), text


def test_ranks_in_two_collectives_are_both_named_with_ddps_forward_as_the_fix() -> None:
    """dist_eval_hang's story: rank 0 in DDP's forward (its buffer broadcast) alone, rank 1 in
    dist.barrier(); neither stands out by itself, so both are named."""
    ddp = (
        f"DistributedDataParallel._distributed_broadcast_coalesced ({TORCH}/nn/parallel/distributed.py:2363)",
        f"DistributedDataParallel.forward ({TORCH}/nn/parallel/distributed.py:1886)",
        f"validate ({TRAIN}:34)",
        f"main ({TRAIN}:58)",
    )
    barrier = (f"barrier ({TORCH}/distributed/distributed_c10d.py:5356)", f"main ({TRAIN}:59)")
    title, where, text = verdict(AGENT + rank(100, *ddp) + rank(101, *barrier), roles=RANKS)
    assert title.endswith("(rank 0 in validate(), rank 1 in main())"), title
    assert where == f"{TRAIN}:34 (validate)"
    assert any(t.startswith("rank 0 called the DDP-wrapped model where the other") for t in text)


def test_ranks_at_the_same_line_are_told_as_one_process() -> None:
    title, where, _text = verdict(
        AGENT + rank(100, *IN_BACKWARD) + rank(101, *IN_BACKWARD), roles=RANKS
    )
    assert title.endswith("rank 0 is blocked in main()"), title
    assert where == f"{TRAIN}:60 (main)"


def test_the_main_process_blocked_in_its_own_code() -> None:
    dump = f"""=== pid 100 (python) ===
Thread 100 (idle): "MainThread"
    socket.recv_into ({PY}/socket.py:706)
    upload ({TRAIN}:40)
    main ({TRAIN}:90)
"""
    title, where, _text = verdict(dump)
    assert title.endswith("the main process is blocked in upload()")
    assert where == f"{TRAIN}:40 (upload)"


def test_compiling_when_the_timeout_ran_out_is_not_called_a_deadlock() -> None:
    dump = f"""=== pid 100 (python) ===
Thread 100 (active): "MainThread"
    codegen ({TORCH}/_inductor/scheduler.py:10)
    compile_fx_inner ({TORCH}/_inductor/compile_fx.py:700)
    backward ({TORCH}/_tensor.py:600)
    main ({TRAIN}:70)
"""
    title, _where, text = verdict(dump, {"silent_s": 60.0, "steps_before": 0})
    assert "torch.compile was still compiling" in title
    assert any("--timeout" in line for line in text)


def test_a_reported_silence_the_job_ended_by_itself_after_is_a_pause_not_a_hang() -> None:
    """No step for 10 s after the last one, in a profiler's processing (py-spy: "active+gil"),
    reported while the job ran; the job then exited 0 by itself: information, last, at the
    user's line, with the main thread's own stack (not trainprof's flush thread)."""
    from trainprof.analysis.pipeline import analyze

    dump = f"""=== pid 1000 (python) ===
Thread 1000 (active+gil): "MainThread"
    profile._parse_kineto_results ({TORCH}/autograd/profiler.py:727)
    profile.key_averages ({TORCH}/autograd/profiler.py:574)
    main ({TRAIN}:51)
Thread 1008 (idle): "trainprof-flush"
    EventWriter._flush_loop (/venv/site-packages/trainprof/probe/writer.py:238)
"""
    hang = {"silent_s": 10.1, "steps_before": 100, "unit": "optimizer step"}
    for stopped, code, severity in ((None, 0, "info"), ("hang", 124, "error")):
        sess = session(process(100), hang=hang, stopped_by=stopped, exit_code=code)
        sess.hang_dumps = parse(dump)
        f = next(f for f in analyze(sess)[1].findings if f.id == "hang")
        assert f.severity == severity
        assert any("running in _parse_kineto_results(), called from" in e for e in f.evidence)
        if severity == "info":
            assert f.title == (
                "A pause, not a hang: no progress for 10 s, then the job ended by itself (exit 0)"
            )
            assert f.where == f"{TRAIN}:51 (main)"


def test_stopped_while_at_work_says_where_and_not_a_hang() -> None:
    """A final evaluation the watch found at work (its stack moved) still going when --timeout
    or a Ctrl-C stopped the job: its place and why it was work, not a hang; a warning past
    --timeout (the run ran out of time without a step), information after a Ctrl-C."""
    from trainprof.analysis.pipeline import analyze

    dump = f"""=== pid 1000 (python) ===
Thread 1000 (active): "MainThread"
    Linear.forward ({TORCH}/nn/modules/linear.py:125)
    evaluate ({TRAIN}:61)
    main ({TRAIN}:90)
"""
    why = "the main thread of pid 1000 moved: 3 different stacks in 8 looks over 2.0 s"
    hang = {"silent_s": 30.4, "steps_before": 100, "unit": "optimizer step", "at_work": why}
    for stopped, code, severity, by in (
        ("timeout", 124, "warning", "--timeout"),
        ("interrupt", 130, "info", "a Ctrl-C"),
    ):
        sess = session(process(100), hang=hang, stopped_by=stopped, exit_code=code)
        sess.hang_dumps = parse(dump)
        f = next(f for f in analyze(sess)[1].findings if f.id == "hang")
        assert (f.severity, f.where) == (severity, f"{TRAIN}:61 (evaluate)")
        assert f.title == (
            f"No progress for 30 s, at work in evaluate() when {by} stopped the job: not a hang"
        )
        assert f"at work: {why}" in f.evidence


def test_stopped_while_a_worker_was_at_work_says_it_made_a_batch() -> None:
    """The main process waited for a batch while a worker made it (the worker's stack moved):
    the title does not put the work in the main process's function."""
    from trainprof.analysis.pipeline import analyze

    why = "the main thread of pid 101 moved: 4 different stacks in 8 looks over 2.0 s"
    hang = {"silent_s": 30.4, "steps_before": 100, "unit": "optimizer step", "at_work": why}
    sess = session(process(100), hang=hang, stopped_by="timeout", exit_code=124)
    sess.hang_dumps = parse(MAIN_IN_LOADER)
    f = next(f for f in analyze(sess)[1].findings if f.id == "hang")
    assert f.title == (
        "No progress for 30 s, at work, making a batch when --timeout stopped the job: not a hang"
    )
    assert any("waiting for a batch from the DataLoader" in e for e in f.evidence)
