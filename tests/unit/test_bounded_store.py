"""What keeps a long run's directory small: compact samples, bounded stack chunks."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from trainprof.collect.samplers.loop import LONG_RUN_AFTER_S, RowCompactor, sample_interval
from trainprof.collect.samplers.stacks import FAST_CHUNKS, KEEP_LAST_CHUNKS, StackRecorder
from trainprof.store.session import Samples, StackSpan
from trainprof.store.source_text import source_lines
from trainprof.store.stacks import load_spans, pack


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
    assert source_lines([span]) == {("/home/user/tr\x00ain.py", 3): ""}


def test_default_interval_widens_after_ten_minutes_but_an_explicit_one_is_kept() -> None:
    assert sample_interval(10.0, 0.5, adaptive=True) == 0.5
    assert sample_interval(LONG_RUN_AFTER_S + 1, 0.5, adaptive=True) == 2.0
    assert sample_interval(LONG_RUN_AFTER_S + 1, 0.5, adaptive=False) == 0.5
    assert sample_interval(LONG_RUN_AFTER_S + 1, 5.0, adaptive=True) == 5.0


def _trace(samples: int) -> str:
    """A main thread's stack samples as py-spy writes them (begin/end events, µs)."""
    events = []
    for k in range(samples):
        for ph, ts in (("B", k * 20_000), ("E", k * 20_000 + 19_000)):
            for name, line in (("<module>", 9), ("step", 30 + k % 3)):
                args = {"filename": "/job/train.py", "line": line}
                events.append({"args": args, "name": name, "ph": ph, "tid": 1, "ts": ts})
    return json.dumps(events)


def test_a_finished_chunk_is_gzipped_privately_and_reads_back_the_same(tmp_path: Path) -> None:
    trace = tmp_path / "stacks-0.json"
    trace.write_text(_trace(500))
    before = load_spans(trace, 10.0)
    packed = pack(trace)
    assert packed == tmp_path / "stacks-0.json.gz" and not trace.exists()
    assert stat.S_IMODE(packed.stat().st_mode) == 0o600
    assert packed.stat().st_size * 10 < len(_trace(500))
    assert load_spans(packed, 10.0) == before and len(before) == 500
    # run.json written before the chunk was packed still names it by its old name
    assert load_spans(trace, 10.0) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stacks-0.json.gz"]


def test_a_cut_or_damaged_gzipped_chunk_gives_no_stacks_and_no_error(tmp_path: Path) -> None:
    trace = tmp_path / "stacks-0.json"
    trace.write_text(_trace(200))
    packed = pack(trace)
    assert packed is not None
    data = packed.read_bytes()
    packed.write_bytes(data[: len(data) // 2])
    assert load_spans(packed, 0.0) == []
    packed.write_bytes(data[:20] + b"\xff\x00garbage" * 50)
    assert load_spans(packed, 0.0) == []


def test_a_chunk_that_cannot_be_packed_is_kept_as_it_is(tmp_path: Path) -> None:
    assert pack(tmp_path / "stacks-0.json") is None  # gone before it was packed
    assert list(tmp_path.iterdir()) == []
