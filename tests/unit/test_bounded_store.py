"""What keeps a long run's directory small: compact samples, bounded stack chunks."""

from __future__ import annotations

import json
from pathlib import Path

from trainprof.samplers.loop import LONG_RUN_AFTER_S, RowCompactor, sample_interval
from trainprof.samplers.stacks import FAST_CHUNKS, KEEP_LAST_CHUNKS, StackRecorder
from trainprof.store.session import Samples, StackSpan, _source_lines


def row(t: float, rss: int) -> dict[str, object]:
    return {
        "t": t,
        "procs": [
            {
                "pid": 7,
                "ppid": 1,
                "name": "python",
                "cpu": 10.0,
                "rss": rss,
                "fds": 9,
                "nofile": [1024, 4096],
            }
        ],
        "mem": {"total": 100, "available": 50, "used": 50},
        "swap": {"total": 0, "used": 0, "in_bps": None, "out_bps": None},
        "shm": {"total": 64, "used": 1},
        "gpu": {"unavailable": "no driver"},
    }


def test_unchanged_fields_are_written_once_and_read_back() -> None:
    compactor = RowCompactor()
    written = [compactor.compact(row(float(i), 1000 + i)) for i in range(3)]
    assert "name" in written[0]["procs"][0] and "name" not in written[1]["procs"][0]  # type: ignore[index]
    assert "total" in written[0]["mem"] and "total" not in written[2]["mem"]  # type: ignore[operator]
    assert "gpu" not in written[1]
    assert len(json.dumps(written[2])) < len(json.dumps(written[0]))
    samples = Samples()
    for w in written:
        samples.add(json.loads(json.dumps(w)))
    assert samples.mem_total == 100 and samples.shm_total == 64
    assert samples.gpu_unavailable == "no driver"
    assert samples.procs[7].nofile == (1024, 4096)
    assert list(samples.procs[7].rss) == [1000, 1001, 1002]


def test_middle_stack_chunks_are_dropped(tmp_path: Path) -> None:
    rec = StackRecorder(pid=1, run_dir=tmp_path)
    for i in range(FAST_CHUNKS + KEEP_LAST_CHUNKS + 4):
        (tmp_path / f"stacks-{i}.json").write_text("[]")
        rec.chunks.append({"file": f"stacks-{i}.json", "started_at": float(i), "rate_hz": 10})
    rec._forget_middle_chunks()
    kept = [c["file"] for c in rec.chunks]
    assert kept[:FAST_CHUNKS] == [f"stacks-{i}.json" for i in range(FAST_CHUNKS)]
    assert len(kept) == FAST_CHUNKS + KEEP_LAST_CHUNKS
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(kept)  # type: ignore[type-var]


def test_a_torn_path_in_a_stack_sample_is_not_fatal() -> None:
    span = StackSpan(0.0, 1.0, (("main", "/home/user/tr\x00ain.py", 3),))
    assert _source_lines([span]) == {("/home/user/tr\x00ain.py", 3): ""}


def test_default_interval_widens_after_ten_minutes_but_an_explicit_one_is_kept() -> None:
    assert sample_interval(10.0, 0.5, adaptive=True) == 0.5
    assert sample_interval(LONG_RUN_AFTER_S + 1, 0.5, adaptive=True) == 2.0
    assert sample_interval(LONG_RUN_AFTER_S + 1, 0.5, adaptive=False) == 0.5
    assert sample_interval(LONG_RUN_AFTER_S + 1, 5.0, adaptive=True) == 5.0
