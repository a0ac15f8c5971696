"""Distributed jobs for real: `trainprof run -- torchrun ...` on CPU with gloo, two ranks.

- a rank-0-only metrics straggler: straggler-rank first, naming rank 0 and its function; the
  same work on rank 1 instead, named from rank 1's own stacks
- a rank that raises mid-training: rank-failed names it, its exit code and error; the other
  rank's gloo error is a consequence
- a rank that aborts in the interpreter's shutdown, after its training: rank-failed says so
- two "nodes" (two `trainprof run`s of `torchrun --nnodes 2` on localhost) merged by
  `trainprof report A B`: one report of both ranks, and a healthy DDP job gets no warning

Each job runs once (module-scoped fixtures); torchrun's start-up is most of the time.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import Result, assert_rules_ran, run_trainprof, trainprof_cmd, write_script
from test_hardening_cli import SCHEMA_PATH, check

from trainprof.examples.zoo import script_path

TORCHRUN = str(Path(sys.executable).parent / "torchrun")
SCHEMA = json.loads(SCHEMA_PATH.read_text())


def schema_errors(report: dict[str, Any]) -> list[str]:
    """What this module adds to the contract, checked against docs/report.schema.json."""
    props = SCHEMA["properties"]
    run = SCHEMA["$defs"]["run"]["properties"]
    return check(report["ranks"], props["ranks"], SCHEMA) + check(
        report["run"].get("nodes"), run["nodes"], SCHEMA
    )


def torchrun(
    tmp: Path,
    name: str,
    *args: str,
    env: dict[str, str] | None = None,
    run_args: tuple[str, ...] = (),
) -> Result:
    return run_trainprof(
        tmp,
        "--",
        TORCHRUN,
        "--nproc-per-node",
        "2",
        *args,
        str(script_path(name)),
        env=env,
        timeout=240,
        run_args=("--timeout", "180", *run_args),
    )


def describe(report: dict[str, Any] | None) -> str:
    return "\n".join(
        f"{f['id']} {f['severity']} {f['title']} {f['evidence']}"
        for f in (report or {}).get("findings", [])
    )


@pytest.fixture(scope="module")
def straggler(tmp_path_factory: pytest.TempPathFactory) -> Result:
    return torchrun(tmp_path_factory.mktemp("straggler"), "dist_metrics_straggler")


@pytest.fixture(scope="module")
def rank1_straggler(tmp_path_factory: pytest.TempPathFactory) -> Result:
    env = {**os.environ, "ZOO_SLOW_RANK": "1", "ZOO_STEPS": "200"}
    return torchrun(tmp_path_factory.mktemp("rank1"), "dist_metrics_straggler", env=env)


@pytest.fixture(scope="module")
def spawned_straggler(tmp_path_factory: pytest.TempPathFactory) -> Result:
    """The same rank-1 straggler, its ranks started by torch.multiprocessing.spawn: no RANK in
    their environment; the rank comes from init_process_group."""
    env = {**os.environ, "ZOO_LAUNCH": "spawn", "ZOO_SLOW_RANK": "1", "ZOO_STEPS": "200"}
    return run_trainprof(
        tmp_path_factory.mktemp("spawned"),
        str(script_path("dist_metrics_straggler")),
        env=env,
        timeout=240,
        run_args=("--timeout", "180"),
    )


@pytest.fixture(scope="module")
def failed(tmp_path_factory: pytest.TempPathFactory) -> Result:
    return torchrun(tmp_path_factory.mktemp("failed"), "dist_rank_fails")


def metrics_straggler_first(r: Result, rank: int) -> dict[str, Any]:
    """The run of dist_metrics_straggler ended well and its first finding names ``rank`` as the
    straggler, with the CPU work in its loop and the function that does it."""
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.problems and r.problems[0] == "straggler-rank", describe(r.report)
    f: dict[str, Any] = r.report["findings"][0]  # type: ignore[index]
    assert f["title"].startswith(f"Rank {rank} is the straggler"), f
    assert "extra CPU work in its loop" in f["title"]
    assert f["where"] and "dist_metrics_straggler.py:" in f["where"] and "(update)" in f["where"]
    return f


def test_ddp_accumulation_outside_no_sync_is_named_at_its_backward_line(tmp_path: Path) -> None:
    """dist_accumulation all-reduces in all 4 backward passes of a step: the finding counts them
    on the probe's record, measures the wait (gloo, on the host) and names the backward line;
    the same loop with the first 3 inside no_sync() (ZOO_NO_SYNC=1) gets no finding."""
    (tmp_path / "sync").mkdir()
    (tmp_path / "no_sync").mkdir()
    r = torchrun(tmp_path / "sync", "dist_accumulation")
    assert r.report is not None, r.stderr[-3000:]
    first = r.report["findings"][0]
    assert first["id"] == "accumulation-allreduce", describe(r.report)
    assert "4 backward passes; DDP all-reduced the gradients in 4 of them" in first["evidence"][0]
    assert "waited" in first["evidence"][1] and first["impact"] > 0.05, first
    text = script_path("dist_accumulation").read_text().splitlines()
    line = next(i for i, t in enumerate(text, 1) if t.strip() == "loss.backward()")
    assert first["where"].endswith(f"dist_accumulation.py:{line} (main)"), first["where"]
    fixed = torchrun(
        tmp_path / "no_sync", "dist_accumulation", env={**os.environ, "ZOO_NO_SYNC": "1"}
    )
    assert fixed.report is not None, fixed.stderr[-3000:]
    assert fixed.report["findings"] == [], describe(fixed.report)
    assert_rules_ran(fixed.report)


@pytest.mark.parallel
def test_ranks_waiting_in_different_collectives_are_a_hang_named_at_both_lines(
    tmp_path: Path,
) -> None:
    """dist_eval_hang: rank 0 validates through the DDP-wrapped model alone (its forward
    broadcasts BatchNorm's buffers), rank 1 waits in dist.barrier(). The hang is told from the
    ranks' stacks, not from torchrun's agent above them (once "the main process is blocked in
    <module>()" at torchrun's own line), with DDP's forward as the fix."""
    r = torchrun(tmp_path, "dist_eval_hang", run_args=("--hang-after", "2"))
    assert r.returncode == 124, r.stderr[-3000:]
    assert r.problems and r.problems[0] == "hang", describe(r.report)
    f: dict[str, Any] = r.report["findings"][0]  # type: ignore[index]
    assert f["title"].endswith(
        "the ranks stopped at different lines (rank 0 in validate(), rank 1 in main())"
    ), f["title"]
    text = script_path("dist_eval_hang").read_text().splitlines()
    line = next(i for i, s in enumerate(text, 1) if "total += model(x)" in s)
    assert f["where"].endswith(f"dist_eval_hang.py:{line} (validate)"), f["where"]
    assert any("blocked in barrier()" in e and e.startswith("rank 1") for e in f["evidence"])
    assert f["fix"][0].startswith("rank 0 called the DDP-wrapped model where the other ranks")
    assert not any("torchrun" in e for e in f["evidence"]), f["evidence"]
    # the job's steps are one rank's: 50 each before the validation, not 100
    assert re.search(r"after 50 optimizer steps", f["evidence"][0]), f["evidence"]


def test_a_distributed_sampler_never_given_set_epoch_is_named(tmp_path: Path) -> None:
    """dist_same_shuffle makes 3 passes over its DistributedSampler(shuffle=True) at epoch 0
    (dist_healthy, which calls set_epoch before each of its 2 epochs, is the control: see
    test_a_healthy_ddp_job_gets_no_warning)."""
    r = torchrun(tmp_path, "dist_same_shuffle")
    assert r.report is not None, r.stderr[-3000:]
    first = r.report["findings"][0]
    assert first["id"] == "sampler-set-epoch", describe(r.report)
    assert "(3 passes over the data, all at epoch 0)" in first["title"], first["title"]
    assert first["where"] and "dist_same_shuffle.py:" in first["where"], first["where"]


def test_a_rank_0_only_metrics_straggler_is_named_first_with_its_function(
    straggler: Result,
) -> None:
    r = straggler
    f = metrics_straggler_first(r, 0)
    assert "loop-overhead" not in r.problems  # the loop's extra work is the straggler's cost
    assert any("the other rank waits" in e and "rank 0's pace" in e for e in f["evidence"])
    assert f["impact"] > 0.3


def test_a_straggler_that_is_not_rank_0_is_named_with_its_function_from_its_own_stacks(
    rank1_straggler: Result,
) -> None:
    """Rank 1 keeps the metrics: only its own stacks (a py-spy of its own) show the work."""
    r = rank1_straggler
    f = metrics_straggler_first(r, 1)
    own = next(e for e in f["evidence"] if e.startswith("its own stacks:"))
    assert "hottest in update()" in own and "(rank 0: " in own, own
    assert [x["stacks_sampled"] for x in r.report["ranks"]["per_rank"]] == [True, True]  # type: ignore[index]
    stacks = json.loads((r.run_dir / "run.json").read_text())["stacks"]
    assert [(x["rank"], x["chunks"][0]["file"]) for x in stacks["ranks"]] == [
        (1, "stacks-rank1-0.json.gz")
    ]


def test_ranks_started_by_multiprocessing_spawn_are_ranks_too(spawned_straggler: Result) -> None:
    """The DDP tutorial's launch: the script's own process only waits in spawn's join. It was
    read as one process "idle 94%" with no ranks box and no straggler; now each rank is a rank
    (its number from init_process_group), rank 0's stacks are the main ones and rank 1's its
    own."""
    r = spawned_straggler
    f = metrics_straggler_first(r, 1)
    assert any(e.startswith("its own stacks:") and "update()" in e for e in f["evidence"]), f
    per_rank = r.report["ranks"]["per_rank"]  # type: ignore[index]
    assert [x["rank"] for x in per_rank] == [0, 1], per_rank
    stacks = json.loads((r.run_dir / "run.json").read_text())["stacks"]
    main = next(p for p in r.report["ranks"]["per_rank"] if p["rank"] == 0)  # type: ignore[index]
    assert stacks["pid"] == main["pid"], (stacks, main)  # followed from the launcher to rank 0


def test_the_trace_shows_each_ranks_own_stacks_under_its_steps(
    rank1_straggler: Result, tmp_path: Path
) -> None:
    path = tmp_path / "trace.json"
    cmd = trainprof_cmd("report", str(rank1_straggler.run_dir), "--trace", str(path))
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    events = json.loads(path.read_text())["traceEvents"]
    names = {
        e["args"]["name"]: e["pid"]
        for e in events
        if e["ph"] == "M" and e["name"] == "process_name"
    }
    rank1 = next(pid for name, pid in names.items() if "rank 1" in name)
    own = {e["name"] for e in events if e["pid"] == rank1 and e.get("cat") == "stack"}
    assert "RunningMetrics.update" in own, sorted(own)[:20]


def test_every_rank_is_in_the_json_report_and_the_console(straggler: Result) -> None:
    report = straggler.report
    assert report is not None
    assert schema_errors(report) == []
    ranks = report["ranks"]
    assert ranks["count"] == 2 and ranks["collectives_measured"] is True
    assert ranks["slowest"]["rank"] == 0 and ranks["slowest"]["by"] == "collectives"
    r0, r1 = ranks["per_rank"]
    assert (r0["rank"], r1["rank"]) == (0, 1)
    for r in (r0, r1):
        assert r["steps"] == 300 and r["steps_per_s"] > 0 and r["step_time_s"] > 0
        assert r["collective_per_step_s"] is not None and r["data_wait_per_step_s"] is not None
        assert r["peak_rss_bytes"] and r["exception"] is None and r["backend"] == "gloo"
    # rank 1 waits for rank 0 in DDP's all-reduce, about as long as rank 0's extra work
    assert r1["ddp_wait_per_step_s"] > 3 * r0["ddp_wait_per_step_s"]
    assert r0["busy_per_step_s"] > 3 * r1["busy_per_step_s"]
    assert r0["stacks_sampled"] is True and r1["stacks_sampled"] is True  # each its own py-spy
    assert "╭─ ranks" in straggler.stderr and "collectives" in straggler.stderr


@pytest.mark.parallel
def test_a_rank_that_fails_is_named_with_its_error_and_the_others_are_consequences(
    failed: Result,
) -> None:
    r = failed
    assert r.returncode == 1, r.stderr[-3000:]
    assert r.problems and r.problems[0] == "rank-failed", describe(r.report)
    f = r.report["findings"][0]  # type: ignore[index]
    assert f["severity"] == "error"
    assert f["where"] and "dist_rank_fails.py:" in f["where"] and "(__getitem__)" in f["where"]
    evidence = "\n".join(f["evidence"])
    if re.search(
        r"torchrun's Root Cause: rank 1 \(local_rank 1[^\n]*\) exited with code 1", evidence
    ):
        assert f["title"].startswith("Rank 1 exited with code 1: ValueError: corrupt record")
    else:
        # A loaded CI run: rank 0 lost its peer and exited while rank 1 was still exiting, and
        # torchrun SIGTERMed rank 1; or gloo aborted rank 1 as it exited after its error
        # (SIGABRT, 1 in 8 plain torchrun runs). Both unit-tested in test_torchrun_failures.py.
        assert f["title"].startswith("Rank 1 failed: ValueError: corrupt record"), f["title"]
        assert "rank 1 had raised its error and" in evidence, evidence
    # rank 0 waited in the all-reduce: gloo's error there, or torchrun's SIGTERM first
    assert "rank 0: " in evidence and "(a consequence: rank 1 was gone)" in evidence
    assert schema_errors(r.report) == []


# A native library's teardown aborting at exit, as gloo's worker thread does at random under
# torch 2.13 ("terminate called without an active exception"): here on purpose, on rank 0.
ABORTS_AT_EXIT = """\
    import os

    import torch
    import torch.distributed as dist


    class NativeHandle:
        # abort bound now: at shutdown the module's globals (os) may be cleared before this runs
        def __del__(self, abort=os.abort) -> None:
            abort()


    def main() -> None:
        dist.init_process_group("gloo")
        model = torch.nn.Linear(8, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(20):
            opt.zero_grad()
            model(torch.randn(4, 8)).sum().backward()
            for p in model.parameters():
                dist.all_reduce(p.grad)
            opt.step()
        dist.barrier()
        dist.destroy_process_group()


    if os.environ["RANK"] == "0":
        handle = NativeHandle()  # freed as the interpreter shuts down, after main() returned
    main()
"""


@pytest.mark.parallel
def test_a_rank_that_aborts_after_its_script_ended_is_told_apart_from_a_crash_in_training(
    tmp_path: Path,
) -> None:
    script = write_script(tmp_path, "train.py", ABORTS_AT_EXIT)
    r = run_trainprof(tmp_path, "--", TORCHRUN, "--nproc-per-node", "2", str(script), timeout=240)
    assert r.returncode == 1, r.stderr[-3000:]
    assert r.problems and r.problems[0] == "rank-failed", describe(r.report)
    f = r.report["findings"][0]  # type: ignore[index]
    assert f["title"] == "Rank 0 was killed by SIGABRT (exit code -6) after its script ended"
    evidence = "\n".join(f["evidence"])
    assert "its exit handlers had run (20 steps recorded)" in evidence
    assert "SIGABRT is what a process's own abort() raises" in evidence
    assert "came from outside" not in evidence
    assert f["fix"][0].startswith("the training ran to its end")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], list[Any], Any]:
    """Two `trainprof run`s, one per "node", of one torchrun job rendezvousing on localhost."""
    tmp = tmp_path_factory.mktemp("nodes")
    port = free_port()
    procs, dirs = [], []
    for node in (0, 1):
        run_dir = tmp / f"node-{node}"
        dirs.append(run_dir)
        cmd = trainprof_cmd(
            "run", "--quiet", "--timeout", "180", "--run-dir", str(run_dir),
            "--json", str(tmp / f"node-{node}.json"), "--",
            TORCHRUN, "--nnodes", "2", "--node-rank", str(node), "--nproc-per-node", "1",
            "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
            "--rdzv-id", "tp-two-nodes", str(script_path("dist_healthy")),
        )  # fmt: skip
        procs.append(subprocess.Popen(cmd, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    outs = [p.communicate(timeout=240) for p in procs]
    merged = subprocess.run(
        trainprof_cmd("report", *map(str, dirs), "--json", str(tmp / "merged.json")),
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads((tmp / "merged.json").read_text()) if merged.returncode == 0 else None
    return (
        dirs,
        [(p.returncode, o, e) for p, (o, e) in zip(procs, outs, strict=True)],
        (
            merged,
            report,
        ),
    )


def test_two_nodes_merge_into_one_report_of_every_rank(two_nodes: Any) -> None:
    dirs, runs, (merged, report) = two_nodes
    for code, _out, err in runs:
        assert code == 0, err.decode()[-3000:]
    assert merged.returncode == 0, merged.stderr[-3000:]
    assert report is not None and schema_errors(report) == []
    nodes = report["run"]["nodes"]
    # c10d rendezvous gives global ranks in join order, whatever --node-rank says
    assert sorted(r for n in nodes for r in n["ranks"]) == [0, 1]
    assert all(len(n["ranks"]) == 1 for n in nodes)
    base = next(n for n in nodes if n["aligned_by"] == "base")
    other = next(n for n in nodes if n is not base)
    assert base["ranks"] == [0] and other["aligned_by"] == "step ends"
    assert abs(other["offset_s"]) < 0.5  # one machine: one clock, up to a step's skew
    per_rank = report["ranks"]["per_rank"]
    assert [(r["rank"], r["node"]) for r in per_rank] == [(0, base["node"]), (1, other["node"])]
    assert all(r["steps"] == 1000 and r["collective_per_step_s"] is not None for r in per_rank)
    assert report["summary"]["steps"] == 1000
    assert f"node {other['node']}: clock" in merged.stdout
    assert f"1 (node {other['node']})" in merged.stdout
    # each node's own report stays its own: the merged one is not written into a node
    own = json.loads((dirs[other["node"]] / "report.json").read_text())
    assert own["run"]["nodes"] is None and own["ranks"]["count"] == 1


def test_a_healthy_ddp_job_gets_no_warning(two_nodes: Any) -> None:
    _dirs, _runs, (_merged, report) = two_nodes
    assert report is not None
    skipped = {s["id"] for s in report["skipped"]}
    assert "straggler-rank" not in skipped, report["skipped"]  # judged, not skipped
    assert "sampler-set-epoch" not in skipped, report["skipped"]  # its set_epoch: judged
    problems = [f["id"] for f in report["findings"] if f["severity"] != "info"]
    assert problems == [], describe(report)
    assert_rules_ran(report)
    assert report["ranks"]["slowest"]["lost_share"] < 0.15


def test_report_of_a_missing_node_is_one_line(two_nodes: Any, tmp_path: Path) -> None:
    dirs, _runs, _merged = two_nodes
    r = subprocess.run(
        trainprof_cmd("report", str(dirs[0]), str(tmp_path / "nope")),
        capture_output=True,
        text=True,
        env={**os.environ},
    )
    assert r.returncode == 2 and r.stderr.strip().startswith("trainprof: no such run directory")
    assert "Traceback" not in r.stderr
