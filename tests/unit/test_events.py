"""The event format: torn lines, incremental tailing, headers of other versions."""

from __future__ import annotations

import json
from pathlib import Path

from trainprof.collect.launcher import exit_code_of
from trainprof.render.console import sparkline
from trainprof.store.events import EventTail, load_process

HEADER = "#TP1 " + json.dumps(
    {"magic": "trainprof-events", "version": 1, "pid": 7, "role": "main", "t0": 5.0}
)


def test_torn_last_line_is_counted_not_fatal(tmp_path: Path) -> None:
    p = tmp_path / "events-7.tp"
    p.write_text(HEADER + "\nS 1000 1000 10 0 4 1 4\nS 2000 1000 1")
    log = load_process(str(p))
    assert log is not None
    assert log.n_steps == 1
    assert list(log.steps["samples"]) == [4]


def test_malformed_lines_are_skipped(tmp_path: Path) -> None:
    p = tmp_path / "events-7.tp"
    p.write_text(HEADER + '\nS x y\nQ what\nC 1 2 3 "/tmp/a.pt"\n')
    log = load_process(str(p))
    assert log is not None
    assert log.bad_lines == 2
    assert log.saves == [(1, 2, 3, "/tmp/a.pt")]


def test_other_schema_version_is_not_read(tmp_path: Path) -> None:
    p = tmp_path / "events-8.tp"
    p.write_text("#TP1 " + json.dumps({"version": 99}) + "\nS 1 1 1 1 1 1 1\n")
    assert load_process(str(p)) is None


def test_tail_yields_only_complete_new_lines(tmp_path: Path) -> None:
    p = tmp_path / "events-7.tp"
    p.write_text(HEADER + "\nS 1000 1000 0 0 4 1 4\nS 20")
    tail = EventTail(str(tmp_path))
    assert [line for _, line in tail.poll()] == ["S 1000 1000 0 0 4 1 4"]
    with open(p, "a") as f:
        f.write("00 1000 0 0 4 1 4\n")
    assert [line for _, line in tail.poll()] == ["S 2000 1000 0 0 4 1 4"]
    assert list(tail.poll()) == []


def test_exit_code_of_signals() -> None:
    assert exit_code_of(0) == 0
    assert exit_code_of(3) == 3
    assert exit_code_of(-9) == 137
    assert exit_code_of(-2) == 130


def test_sparkline() -> None:
    assert sparkline([1.0, 2.0, 3.0]) == "▁▄█"
    assert sparkline([2.0, 2.0]) == "▁▁"
    assert sparkline([]) == ""


def test_status_line_with_gpu_unavailable_and_with_gpus() -> None:
    from trainprof.collect.live import LiveView

    view = LiveView("/nonexistent", None, 2)
    view.latest_sample = {
        "procs": [{"cpu": 50.0, "rss": 2**20}],
        "gpu": {"unavailable": "no driver"},
    }
    assert "CPU 50%" in view.status_text(3.0) and "GPU" not in view.status_text(3.0)
    view.latest_sample = {"procs": [], "gpu": [{"util": 40}]}
    assert "GPU 40%" in view.status_text(3.0)
    # Of a machine's GPUs, those NVML lists a process of the job on: a neighbour's is not ours.
    view.latest_sample = {
        "procs": [{"pid": 7, "cpu": 100.0, "rss": 1}, {"pid": 8, "cpu": 0.0, "rss": 1}],
        "gpu": [
            {"util": 100, "procs": {"99": 1 << 30}},
            {"util": 40, "procs": {"7": 1 << 30}},
            {"util": 60, "procs": {"8": 1 << 30}},
            {"util": 0, "procs": {}},
        ],
    }
    assert "GPU 50%" in view.status_text(3.0)
    view.latest_sample = {"procs": [], "gpu": [{"util": 40}, {"util": 60}]}
    assert "GPU" not in view.status_text(3.0), "two GPUs, neither known to be the job's"


def test_a_rank_learned_at_init_process_group_makes_the_process_a_rank(tmp_path: Path) -> None:
    """torch.multiprocessing.spawn gives no RANK: the probe's record of init_process_group
    does, for the stored log and for the live tail alike; a launcher's rank is kept."""
    p = tmp_path / "events-7.tp"
    p.write_text(HEADER + '\nX {"t": 10, "rank": 1, "world_size": 2}\nS 1000 1000 10 0 4 1 4\n')
    log = load_process(str(p))
    assert log is not None
    assert (log.role, log.header["rank"], log.header["world_size"]) == ("rank", 1, 2)
    seen = [(dict(h), line[0]) for h, line in EventTail(str(tmp_path)).poll()]
    assert seen[-1][0]["rank"] == 1 and seen[-1][0]["role"] == "rank" and seen[-1][1] == "S"
    launched = tmp_path / "launched" / "events-8.tp"
    launched.parent.mkdir()
    header = json.loads(HEADER[5:]) | {"pid": 8, "role": "rank", "rank": 0, "world_size": 2}
    launched.write_text(f"#TP1 {json.dumps(header)}\n" + 'X {"t": 10, "rank": 3}\n')
    kept = load_process(str(launched))
    assert kept is not None and kept.header["rank"] == 0
