"""Per-rank views, the straggler by any cause, the console table at 64 ranks, the report's
``ranks`` object, rules judged per rank, and the multi-node merge, on synthetic sessions with
exact numbers (the real torchrun runs are in tests/integration/test_distributed.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from synth import loop_spans, process, session

from trainprof.analysis.pipeline import analyze, rank_findings
from trainprof.analysis.rank_hits import with_rank_hits
from trainprof.analysis.ranks import span_text, spread
from trainprof.errors import TrainprofError
from trainprof.render import console as console_render
from trainprof.render.json_report import report_dict
from trainprof.render.ranks import rank_rows
from trainprof.store.events import ProcessLog
from trainprof.store.merge import align, merge
from trainprof.store.session import Session

N_STEPS = 100
STEP_S = 0.05


def rank_log(
    rank: int,
    coll_s: float | None,
    wait_s: float = 0.001,
    t0: float = 100.0,
    wall0: float = 1_700_000_000.0,
    world: int = 2,
    batch_size: int = 32,
    saves: tuple[int, ...] = (),
    backend: str = "gloo",
) -> ProcessLog:
    """A rank of a DDP job: N_STEPS steps of STEP_S, ``coll_s`` per step waiting in the
    all-reduce (cumulative counters, as the probe writes them)."""
    log = process(
        N_STEPS, step_s=STEP_S, wait_s=wait_s, pid=2000 + rank, t0=t0, batch_size=batch_size
    )
    log.header.update(role="rank", rank=rank, local_rank=rank % 8, world_size=world, wall0=wall0)
    if coll_s is not None:
        t_us = 2_000_000  # the first (warm-up) step
        for i in range(1, N_STEPS):
            t_us += int(STEP_S * 1e6)
            if i % 5 == 0 or i in (1, N_STEPS - 1):  # as the probe: first, every 0.25 s, last
                c = {
                    "s": 0.0,
                    "n": 0,
                    "ddp_s": round(coll_s * i, 6),
                    "ddp_n": i,
                    "backend": backend,
                }
                log.add_line("X " + json.dumps({"t": t_us, "collectives": c}))
    for i in saves:
        t_us = 2_000_000 + int(i * STEP_S * 1e6)
        log.add_line(f'C {t_us - 20_000} 20000 1024 "ckpt.pt"')
    return log


def job(waits: dict[int, float], data: dict[int, float] | None = None, **kw: Any) -> Session:
    logs = [
        rank_log(r, c, wait_s=(data or {}).get(r, 0.001), world=len(waits), **kw)
        for r, c in waits.items()
    ]
    return session(*logs)


def test_rank_views_read_each_ranks_steady_state_and_collective_wait() -> None:
    m, _ = analyze(job({0: 0.002, 1: 0.030}))
    r0, r1 = m.activity.ranks
    assert (r0.rank, r1.rank) == (0, 1)
    assert r0.steady_steps == N_STEPS - 5  # 5 % warm-up
    assert r0.step_s == pytest.approx(STEP_S, rel=1e-3)
    assert r0.steps_per_s == pytest.approx(1 / STEP_S, rel=1e-3)
    assert r1.collective_per_step_s == pytest.approx(0.030, rel=0.02)
    assert r0.busy_s == pytest.approx(STEP_S - 0.002, rel=0.02)
    assert r0.primary and not r1.primary


def test_the_rank_that_waits_least_is_the_straggler_and_the_others_loss_is_its_cost() -> None:
    sp = spread(analyze(job({0: 0.002, 1: 0.030}))[0].activity.ranks)
    assert sp is not None and sp.slow.rank == 0 and sp.by == "collectives"
    assert sp.lost_per_step_s == pytest.approx(0.028, rel=0.03)
    assert sp.lost_share == pytest.approx(0.028 / STEP_S, rel=0.03)


def test_even_waits_are_no_straggler() -> None:
    _, verdict = analyze(job({0: 0.010, 1: 0.011, 2: 0.0105}))
    assert "straggler-rank" not in [f.id for f in verdict.findings]


def test_a_data_straggler_is_named_by_its_data_wait() -> None:
    _, verdict = analyze(job({0: 0.025, 1: 0.001}, data={1: 0.026}))
    f = next(f for f in verdict.findings if f.id == "straggler-rank")
    assert f.title.startswith("Rank 1 is the straggler") and "data loading" in f.title
    assert any("it waits for data 26.0 ms per step" in e for e in f.evidence)
    assert any("DistributedSampler(dataset, drop_last=True)" in x for x in f.fix)


def test_an_uneven_shard_and_a_checkpointing_rank_are_named() -> None:
    logs = [rank_log(0, 0.020), rank_log(1, 0.001, batch_size=48)]
    f = next(f for f in analyze(session(*logs))[1].findings if f.id == "straggler-rank")
    assert "bigger shard" in f.title and any("48 samples per step" in e for e in f.evidence)
    logs = [rank_log(0, 0.001, saves=tuple(range(10, 100))), rank_log(1, 0.020)]
    f = next(f for f in analyze(session(*logs))[1].findings if f.id == "straggler-rank")
    assert f.title.startswith("Rank 0") and "checkpoints" in f.title
    assert any("async_save" in x for x in f.fix)


def sampled_rank(sess: Session, rank: int, lines: dict[str, float]) -> None:
    """``rank``'s own stacks (a recorder of its own, as `trainprof run` keeps for every other
    rank): its steady window split between the user lines in ``lines``."""
    primary = sess.spans
    loop_spans(sess, lines, 100.0, 100.0 + 2.0 + N_STEPS * STEP_S)
    sess.rank_spans[rank], sess.spans = sess.spans, primary


def test_a_straggler_that_is_not_the_primary_rank_is_named_from_its_own_stacks() -> None:
    sess = job({0: 0.030, 1: 0.002})  # rank 1 is slow: rank 0 waits 28 ms per step for it
    sampled_rank(sess, 1, {"metrics.update(logits, y)": 0.6, "model(x)": 0.4})
    m, verdict = analyze(sess)
    f = next(f for f in verdict.findings if f.id == "straggler-rank")
    assert f.title.startswith("Rank 1 is the straggler") and "extra CPU work" in f.title, f
    assert f.where == "/home/user/proj/train.py:10 (main)"
    own = next(e for e in f.evidence if e.startswith("its own stacks"))
    assert "host work outside forward/backward 60% of its main thread's time" in own, own
    assert "hottest in main() at /home/user/proj/train.py:10" in own
    assert "(rank 0:" not in own  # rank 0 was not sampled here: no comparison
    assert any("compute metrics on the device" in x for x in f.fix)
    per_rank = report_dict({"command": ["torchrun"]}, m, verdict)["ranks"]["per_rank"]
    assert [r["stacks_sampled"] for r in per_rank] == [False, True]


def test_the_stragglers_share_of_host_work_is_set_beside_the_other_ranks() -> None:
    sess = job({0: 0.030, 1: 0.002})
    sampled_rank(sess, 1, {"metrics.update(logits, y)": 0.6, "model(x)": 0.4})
    loop_spans(sess, {"model(x)": 0.9, "step += 1": 0.1}, 100.0, 107.0)  # rank 0, the primary
    sess.meta["stacks"] = {"pid": 2000}
    f = next(f for f in analyze(sess)[1].findings if f.id == "straggler-rank")
    own = next(e for e in f.evidence if e.startswith("its own stacks"))
    assert "60% of its main thread's time (rank 0: 10%), hottest in main()" in own, own


def test_a_straggler_whose_stacks_show_no_extra_host_work_is_left_unexplained() -> None:
    sess = job({0: 0.030, 1: 0.002})
    sampled_rank(sess, 1, {"model(x)": 1.0})  # forward passes only: no work of its own
    f = next(f for f in analyze(sess)[1].findings if f.id == "straggler-rank")
    assert "it does more work per step" in f.title and f.where is None
    assert "its own stacks: forward 100%" in f.evidence


def test_a_straggler_without_stacks_says_why_its_work_is_unnamed() -> None:
    f = next(f for f in analyze(job({0: 0.030, 1: 0.002}))[1].findings if f.id == "straggler-rank")
    assert "it does more work per step" in f.title and f.where is None
    assert any(e.startswith("its Python stacks were not sampled") for e in f.evidence)


def test_a_straggler_claims_its_loss_from_the_primary_ranks_ledger() -> None:
    _, verdict = analyze(job({0: 0.030, 1: 0.002}))
    f = next(f for f in verdict.findings if f.id == "straggler-rank")
    # rank 1 is slow; rank 0 (the report's ledger, unsplit: no stacks) waits 28 of 50 ms
    assert f.impact == pytest.approx(0.028 / STEP_S, abs=0.03)


def test_without_collective_counters_data_waits_still_name_a_straggler() -> None:
    _, verdict = analyze(job({0: None, 1: None}, data={1: 0.02}))  # type: ignore[dict-item]
    f = next(f for f in verdict.findings if f.id == "straggler-rank")
    assert f.title.startswith("Rank 1 waits for data")
    assert any(
        e.startswith("time in collectives was not measured in this run: the probe recorded")
        for e in f.evidence
    )


def sixty_four() -> Session:
    waits = {r: 0.020 + 0.0001 * (r % 5) for r in range(64)}
    waits[17] = 0.001  # every other rank waits for rank 17
    return job(waits)


def test_console_table_at_64_ranks_shows_the_slowest_and_the_median_not_64_rows() -> None:
    sess = sixty_four()
    m, verdict = analyze(sess)
    rows = rank_rows(m.activity.ranks)
    assert [label for label, _r in rows][:2] == ["slowest", "median"]
    assert rows[0][1].rank == 17 and len(rows) <= 3
    console = Console(width=100, record=True, color_system=None, file=open(os.devnull, "w"))
    console_render.render(console, sess.meta, m, verdict)
    text = console.export_text()
    box = text[text.index("╭─ ranks") : text.index("╭─", text.index("╭─ ranks") + 1)]
    assert len(box.splitlines()) <= 10, box
    assert "64 ranks, 61 not shown (--json has every rank)" in box
    assert "slowest  17" in box
    first = verdict.findings[0]
    assert first.id == "straggler-rank" and first.title.startswith("Rank 17 ")
    assert "the other 63 ranks wait" in " ".join(first.evidence)


def test_report_json_has_every_rank_and_the_aggregate() -> None:
    m, verdict = analyze(sixty_four())
    data = report_dict({"command": ["torchrun"]}, m, verdict)
    ranks = data["ranks"]
    assert ranks["count"] == 64 and len(ranks["per_rank"]) == 64
    assert ranks["slowest"]["rank"] == 17 and ranks["collectives_measured"] is True
    agg = ranks["aggregate"]["collective_per_step_s"]
    assert agg["min_rank"] == 17 and agg["measured"] == 64
    assert agg["min"] == pytest.approx(0.001, rel=0.05)
    assert ranks["aggregate"]["gpu_util"] is None  # not measured, never 0
    r = ranks["per_rank"][17]
    assert r["rank"] == 17 and r["busy_per_step_s"] == pytest.approx(0.049, rel=0.05)
    assert r["cpu_percent"] is None and r["exception"] is None
    json.dumps(data, allow_nan=False)  # plain JSON (the schema check runs on real reports)
    single = report_dict({"command": ["python"]}, *analyze(session(process(100))))
    assert single["ranks"] is None


def test_a_rule_that_hits_another_rank_only_is_named_for_it() -> None:
    # rank 1 waits for data 40 of 50 ms (num_workers=2): input-bound there, not on rank 0
    sess = job({0: 0.040, 1: 0.001}, data={1: 0.040})
    m, verdict = analyze(sess)
    out = with_rank_hits(sess, m.activity.ranks, verdict, rank_findings)
    f = next(f for f in out.findings if f.id == "input-bound")
    assert f.title.startswith("Rank 1: ") and f.impact is None
    assert any("seen on rank 1 of 2, not on rank 0" in e for e in f.evidence)


def test_ranks_are_written_as_runs() -> None:
    assert span_text([5, 0, 1, 2, 3, 9, 7, 8]) == "0–3, 5, 7–9"
    assert span_text([4]) == "4"


def node(ranks: list[int], t0: float, wall0: float, exit_code: int = 0) -> Session:
    logs = [rank_log(r, 0.002, t0=t0, wall0=wall0, world=4) for r in ranks]
    sess = session(*logs, exit_code=exit_code)
    sess.meta["run_dir"] = f"node-{ranks[0]}"
    return sess


def test_merge_puts_every_node_on_the_base_clock() -> None:
    # node B's monotonic clock is 5000 s behind A's; its wall clock is 0.2 s fast (no NTP)
    a = node([0, 1], t0=10_000.0, wall0=1_700_000_000.0)
    b = node([2, 3], t0=5_000.0, wall0=1_700_000_000.2, exit_code=1)
    al = align(a, b)
    assert al.by == "step ends" and al.offset_s == pytest.approx(5000.0, abs=1e-3)
    assert al.wall_s == pytest.approx(5000.2, abs=1e-6)
    merged = merge([b, a])  # any order: the node with rank 0 is the base
    assert merged.meta["exit_code"] == 1
    assert [n["node"] for n in merged.meta["nodes"]] == [0, 1]
    assert merged.meta["nodes"][0]["ranks"] == [2, 3]
    m, _ = analyze(merged)
    assert [r.rank for r in m.activity.ranks] == [0, 1, 2, 3]
    assert {r.node for r in m.activity.ranks} == {0, 1}
    windows = [r.window for r in m.activity.ranks]
    assert all(w is not None and abs(w[0] - windows[0][0]) < 1e-3 for w in windows)  # type: ignore[index]


def test_runs_of_different_jobs_do_not_merge() -> None:
    a = node([0, 1], t0=10.0, wall0=1e9)
    with pytest.raises(TrainprofError, match="rank 0 is in two of these runs"):
        merge([a, node([0, 1], t0=10.0, wall0=1e9)])
    other = session(rank_log(2, 0.002, world=8))
    with pytest.raises(TrainprofError, match="different world sizes"):
        merge([a, other])
    single = session(process(50))
    single.meta["run_dir"] = "trainprof-runs/one-gpu"
    with pytest.raises(TrainprofError, match="one-gpu holds no torchrun rank"):
        merge([a, single])


def test_a_sampled_straggler_outranks_the_rule_of_its_own_cause() -> None:
    from synth import loop_spans

    sess = job({0: 0.004, 1: 0.040})
    sess.meta["stacks"] = {"pid": 2000}
    # rank 0's loop: 80 % in Python metrics, the rest in the model (the straggle's cause)
    loop_spans(sess, {"metrics.update(logits, y)": 0.8, "model(x)": 0.2}, 102.3, 106.9, 0.05)
    m, verdict = analyze(sess)
    first = verdict.findings[0]
    assert first.id == "straggler-rank" and first.title.startswith("Rank 0 is the straggler")
    assert "extra CPU work in its loop" in first.title
    assert first.where == "/home/user/proj/train.py:10 (main)"
    assert "loop-overhead" not in [f.id for f in verdict.findings]
    assert first.impact is not None and first.impact > 0.7


def test_beyond_64_ranks_the_most_different_are_judged_one_by_one() -> None:
    waits = {r: 0.020 for r in range(100)}
    sess = job(waits, data={90: 0.040})
    m, verdict = analyze(sess)
    out = with_rank_hits(sess, m.activity.ranks, verdict, rank_findings)
    f = next(f for f in out.findings if f.id == "input-bound")
    assert f.title.startswith("Rank 90: ")
    assert any("the 65 judged of 100 (the most different ranks)" in e for e in f.evidence)


def test_nccl_host_times_are_no_wait_and_say_so() -> None:
    # NCCL queues the all-reduce on the GPU's streams: the host's time there is no wait
    logs = [rank_log(r, 0.0001, wait_s=0.03 if r == 1 else 0.001, backend="nccl") for r in (0, 1)]
    m, verdict = analyze(session(*logs))
    assert all(r.collective_per_step_s is None and r.backend == "nccl" for r in m.activity.ranks)
    data = report_dict({"command": ["torchrun"]}, m, verdict)["ranks"]
    assert data["collectives_measured"] is False
    assert data["collectives_unmeasured"].startswith("nccl runs them on the GPU's streams")
    assert data["per_rank"][0]["collective_per_step_s"] is None  # not measured, never 0
    f = next(f for f in verdict.findings if f.id == "straggler-rank")
    assert f.title.startswith("Rank 1 waits for data")  # compared by what was measured


def test_every_other_rank_gets_a_recorder_of_its_own_once_it_steps(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The main rank at the full rate; each other rank once, at RANK_RATE_HZ, up to the cap;
    a process without an int rank (a script, a launcher) never as another rank."""
    from types import SimpleNamespace

    from trainprof.collect.samplers import stack_starter

    started: list[tuple[int, int, str | None]] = []

    class Recorder:
        def __init__(self, pid: int, run_dir: Path, rate_hz: int = 50, label: str | None = None):
            self.pid, self.spy_pid, self.chunks, self.error = pid, None, [], None
            self.rate_changes: list[dict[str, float]] = []
            started.append((pid, rate_hz, label))

        def start(self) -> bool:
            return True

        def poll(self) -> None: ...

    monkeypatch.setattr(stack_starter, "StackRecorder", Recorder)
    monkeypatch.setattr(stack_starter, "MAX_OTHER_RANKS", 2)
    job = SimpleNamespace(pid=99)
    starter = stack_starter.StackStarter(tmp_path, job, ["torchrun"])  # type: ignore[arg-type]
    stepping: dict[int, dict[str, object]] = {50: {"rank": None}, 201: {"rank": 1}}
    stats = SimpleNamespace(stepping=stepping, last_progress=None)
    live = SimpleNamespace(stats=stats, latest_sample=None)
    starter.poll(live)  # type: ignore[arg-type]
    assert started == [(50, 50, None), (201, 20, "rank1")]
    stepping.update({200: {"rank": 0}, 203: {"rank": 3}, 204: {"rank": 4}, 205: {"rank": True}})
    starter.poll(live)  # type: ignore[arg-type]
    starter.poll(live)  # type: ignore[arg-type]
    # rank 0 (pid 200) is never another rank; the main recorder (pid 50, still stepping) stays
    assert started[2:] == [(203, 20, "rank3")]  # the cap: two other ranks; a bool is no rank
    assert [r["rank"] for r in starter.describe()["ranks"]] == [1, 3]


def test_the_stack_sampler_follows_rank_0_when_the_script_became_torchrun() -> None:
    from types import SimpleNamespace

    from trainprof.collect.samplers.stack_starter import StackStarter

    starter = StackStarter.__new__(StackStarter)
    starter.recorder = SimpleNamespace(pid=100)  # type: ignore[assignment]
    starter.followed = False
    live = SimpleNamespace(stats=SimpleNamespace(stepping={}))
    assert starter._rank0_elsewhere(live) is None  # type: ignore[arg-type]  # nothing trains yet
    live.stats.stepping = {201: {"rank": 1}, 200: {"rank": 0}}
    assert starter._rank0_elsewhere(live) == 200  # type: ignore[arg-type]
    assert starter._rank0_elsewhere(live) is None  # type: ignore[arg-type]  # once only
    starter.followed = False
    live.stats.stepping = {100: {"rank": None}, 200: {"rank": 0}}
    assert starter._rank0_elsewhere(live) is None  # type: ignore[arg-type]  # it trains itself


def test_the_stacks_of_a_launcher_are_not_read_as_the_trainers() -> None:
    """py-spy sampled the script's own process (mp.spawn's parent, waiting in join) while a
    child trained: its stacks said "main thread idle 94%". The primary's own stacks (rank 0's
    recorder) are read instead, or none, saying why."""
    sess = job({0: 0.002, 1: 0.030})
    sess.processes.append(process(0, pid=7, loader=None))  # the launcher: no steps
    loop_spans(sess, {"time.sleep(1)": 1.0}, 100.0, 107.0)  # the launcher's stacks
    sess.meta["stacks"] = {"pid": 7}
    m, _ = analyze(sess)
    assert m.activity.spans == () and m.activity.profile is None
    assert (
        m.activity.stacks_error == "py-spy sampled pid 7, not the process that trained (pid 2000)"
    )
    launcher = sess.spans
    sampled_rank(sess, 0, {"model(x)": 1.0})  # rank 0's own recorder, the primary's stacks
    assert sess.spans == launcher
    m, _ = analyze(sess)
    assert m.activity.spans == tuple(sess.rank_spans[0]) and m.activity.stacks_error is None
