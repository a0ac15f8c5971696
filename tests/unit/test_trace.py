"""The Chrome trace of a run: valid Trace Event Format, the data wait split, counters that never
invent a zero, and long runs that keep every anomaly in a bounded file."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from synth import process, session

from trainprof.analysis.pipeline import analyze
from trainprof.render import trace, trace_events, trace_stacks, trace_steps

REQUIRED = {
    "X": ("name", "ph", "ts", "dur", "pid", "tid"),
    "B": ("name", "ph", "ts", "pid", "tid"),
    "E": ("ph", "ts", "pid", "tid"),
    "i": ("name", "ph", "ts", "pid", "tid"),
    "C": ("name", "ph", "ts", "pid", "args"),
    "M": ("name", "ph", "pid", "args"),
}


def check_trace(data: dict[str, Any]) -> list[str]:
    """Problems with a Trace Event Format object: required keys per phase, numeric times,
    timestamps that never run backwards within a track (in file order), B/E pairs that
    balance, and complete events that nest (a span never crosses another on its track)."""
    problems: list[str] = []
    events = data.get("traceEvents")
    if not isinstance(events, list):
        return ["no traceEvents list"]
    last_ts: dict[tuple[Any, ...], float] = {}
    open_b: dict[tuple[Any, Any], list[str]] = defaultdict(list)
    spans: dict[tuple[Any, Any], list[tuple[float, float, str]]] = defaultdict(list)
    for n, ev in enumerate(events):
        ph = ev.get("ph")
        if ph not in REQUIRED:
            problems.append(f"event {n}: unknown phase {ph!r}")
            continue
        missing = [k for k in REQUIRED[ph] if k not in ev]
        if missing:
            problems.append(f"event {n} ({ph}): missing {missing}")
            continue
        if ph == "M":
            continue
        ts = ev["ts"]
        if not isinstance(ts, (int, float)) or not math.isfinite(ts):
            problems.append(f"event {n}: ts {ts!r}")
            continue
        track = (ev["pid"], ev.get("tid"), ev["name"]) if ph == "C" else (ev["pid"], ev["tid"])
        if ts < last_ts.get(track, -math.inf):
            problems.append(f"event {n}: ts {ts} runs backwards on track {track}")
        last_ts[track] = ts
        if ph == "X":
            if not isinstance(ev["dur"], (int, float)) or ev["dur"] < 0:
                problems.append(f"event {n}: dur {ev['dur']!r}")
            spans[track].append((ts, ts + ev["dur"], ev["name"]))
        elif ph == "B":
            open_b[track].append(ev["name"])
        elif ph == "E":
            if not open_b[track]:
                problems.append(f"event {n}: E without B on {track}")
            else:
                open_b[track].pop()
    problems += [f"unclosed B {names} on {t}" for t, names in open_b.items() if names]
    for track, xs in spans.items():
        stack: list[tuple[float, float, str]] = []
        for a, b, name in sorted(xs, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1][1] <= a:
                stack.pop()
            if stack and b > stack[-1][1]:
                problems.append(f"{name!r} [{a}, {b}] crosses {stack[-1][2]!r} on {track}")
                break
            stack.append((a, b, name))
    return problems


def test_the_checker_catches_what_it_checks() -> None:
    bad = {
        "traceEvents": [
            {"name": "a", "ph": "X", "ts": 0, "dur": 10, "pid": 1, "tid": 1},
            {"name": "b", "ph": "X", "ts": 5, "dur": 10, "pid": 1, "tid": 1},  # crosses a
            {"name": "c", "ph": "X", "ts": 3, "dur": 1, "pid": 1, "tid": 1},  # backwards
            {"name": "d", "ph": "B", "ts": 20, "pid": 1, "tid": 2},  # never ends
            {"name": "e", "ph": "X", "ts": 1, "pid": 1, "tid": 3},  # no dur
        ]
    }
    text = "\n".join(check_trace(bad))
    assert "crosses" in text and "backwards" in text and "unclosed B" in text
    assert "missing ['dur']" in text


def _stalled_run(n: int, every: int = 50) -> Any:
    """A main process with n steps of 10 ms (2 ms data wait, 0.5 ms sampler) and a 300 ms
    stall every ``every`` steps; host samples every 0.5 s with CPU unmeasured at first."""
    log = process(n, step_s=0.01, wait_s=0.002, sampler_s=0.0005, first_step_s=0.5)
    t = 0
    ts, durs = log.steps["t"], log.steps["dur"]
    for i in range(n):
        d = durs[i] + (300_000 if i and i % every == 0 else 0)
        t += d
        ts[i], durs[i] = t, d
    end = 100.0 + t / 1e6
    rows = []
    k = 0
    while 99.0 + 0.5 * k <= end:
        cpu = None if k == 0 else 90.0
        rows.append(
            {"t": 99.0 + 0.5 * k, "procs": [{"pid": 1000, "cpu": cpu, "rss": 2**28 + k * 2**20}]}
        )
        k += 1
    return session(log, sample_rows=rows)


def test_steps_data_wait_stalls_and_counters() -> None:
    s = _stalled_run(400)
    m, _verdict = analyze(s)
    data = trace.build(s, m)
    assert check_trace(data) == []
    evs = data["traceEvents"]
    steps = [e for e in evs if e["ph"] == "X" and e["tid"] == trace_events.TID_STEPS]
    assert len([e for e in steps if e["name"].startswith("step ")]) == 400
    # The data wait is inside its step, and split: sampler first, then the rest.
    step3 = next(e for e in steps if e["name"] == "step 3")
    wait = next(e for e in steps if e["name"] == "data wait" and e["ts"] == step3["ts"])
    assert wait["dur"] == pytest.approx(2000, abs=2)
    inside = [e for e in steps if e["cat"] == "data" and e is not wait and e["ts"] >= wait["ts"]
              and e["ts"] + e["dur"] <= wait["ts"] + wait["dur"]]  # fmt: skip
    assert [e["name"] for e in inside][:2] == ["sampler", "waiting on workers"]
    assert sum(e["dur"] for e in inside) == pytest.approx(wait["dur"], abs=3)
    # Every stall, on the phases track, over exactly its step.
    stalls = [e for e in evs if e.get("cat") == "stall"]
    assert sorted(e["args"]["step"] for e in stalls) == list(range(50, 400, 50))
    for st in stalls:
        step = next(e for e in steps if e["name"] == f"step {st['args']['step']}")
        assert (st["ts"], st["dur"]) == (step["ts"], step["dur"])
        assert st["name"].startswith("stall: CPU work")  # no stacks: the cause alone
    # CPU was not measured in the first sample: no point there, never a 0.
    cpu = [e for e in evs if e["ph"] == "C" and e["name"] == "CPU %"]
    assert len(cpu) == len(s.samples.t) - 1
    assert all(e["args"]["cpu"] == 90.0 for e in cpu)
    names = {e["args"]["name"] for e in evs if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {"main process", "machine"}


def test_a_span_that_would_cross_another_gets_its_own_lane() -> None:
    t = trace_events.Trace(origin=0.0)
    t.spans(
        1,
        trace_events.TID_PHASES,
        [trace_events.Span("a", 0.0, 1.0, "x"), trace_events.Span("b", 0.5, 2.0, "x")],
    )
    xs = [e for e in t.events if e["ph"] == "X"]
    assert {e["name"]: e["tid"] for e in xs}["a"] == trace_events.TID_PHASES
    assert {e["name"]: e["tid"] for e in xs}["b"] != trace_events.TID_PHASES
    assert check_trace({"traceEvents": sorted(t.events, key=lambda e: e["ts"])}) == []


def test_stack_samples_become_a_flame_chart_on_the_same_clock() -> None:
    from trainprof.store.stacks import StackSpan

    s = _stalled_run(60)
    mod, loop, work = ("<module>", "t.py", 1), ("main", "t.py", 9), ("refresh", "t.py", 30)
    first = s.primary.t0 + s.primary.steps["t"][49] / 1e6  # the stall step (50) starts here
    s.spans = [
        StackSpan(first - 0.1, first, (mod, loop)),
        StackSpan(first, first + 0.1, (mod, loop, work)),
        StackSpan(first + 0.1, first + 0.2, (mod, loop, work)),
        StackSpan(first + 0.2, first + 0.3, (mod, loop)),
    ]
    m, _v = analyze(s)
    data = trace.build(s, m)
    assert check_trace(data) == []
    origin = data["otherData"]["origin_monotonic_s"]
    frames = begin_end_spans(data["traceEvents"])
    refresh = [f for f in frames if f[0] == "refresh"]
    assert len(refresh) == 1  # consecutive samples of one frame are one span
    (_name, ts, dur, depth) = refresh[0]
    assert ts == round((first - origin) * 1e6) and dur == 200_000
    assert depth == 2  # under <module> and main
    assert [(f[0], f[2], f[3]) for f in frames if f[0] != "refresh"] == [
        ("main", 400_000, 1),
        ("<module>", 400_000, 0),
    ]


def begin_end_spans(events: list[dict[str, Any]]) -> list[tuple[str, int, int, int]]:
    """(name, ts, dur, depth) of each B/E pair, in the order they end."""
    out = []
    open_: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        track = (e.get("pid"), e.get("tid"))
        if e["ph"] == "B":
            open_[track].append(e)
        elif e["ph"] == "E":
            b = open_[track].pop()
            out.append((b["name"], b["ts"], e["ts"] - b["ts"], len(open_[track])))
    return out


def test_a_long_run_keeps_every_anomaly_and_stays_small(monkeypatch: pytest.MonkeyPatch) -> None:
    # 30,000 steps with the detail threshold lowered to 3,000: the same code path a
    # million-step run takes at the default (bench.longrun measures that one).
    monkeypatch.setattr(trace_steps, "DETAILED_STEPS", 3_000)
    monkeypatch.setattr(trace_steps, "STEP_BLOCKS", 500)
    s = _stalled_run(30_000, every=1_000)
    m, _v = analyze(s)
    data = trace.build(s, m)
    assert check_trace(data) == []
    steps = [
        e for e in data["traceEvents"] if e["ph"] == "X" and e["tid"] == trace_events.TID_STEPS
    ]
    single = {e["args"]["step"] for e in steps if e["name"].startswith("step ")}
    assert {st.index for st in m.activity.stalls} <= single
    assert len(m.activity.stalls) == 29
    blocks = [e for e in steps if e["name"].startswith("steps ")]
    assert 400 <= len(blocks) <= 600
    # The blocks and the single steps tile the run: every step is drawn exactly once.
    assert sum(e["args"]["steps"] for e in blocks) + len(single) == 30_000
    assert any("blocks" in note for note in data["otherData"]["notes"])
    assert len(json.dumps(data)) < 2_000_000


def test_write_creates_a_private_file(tmp_path: Path) -> None:
    s = _stalled_run(100)
    m, _v = analyze(s)
    path = tmp_path / "out" / "trace.json"
    trace.write(path, trace.build(s, m))
    assert path.stat().st_mode & 0o777 == 0o600
    assert check_trace(json.loads(path.read_text())) == []


def test_a_run_without_steps_keeps_its_processes_and_counters() -> None:
    log = process(0)  # crashed before its first step
    rows = [
        {"t": 99.0 + 0.5 * k, "procs": [{"pid": 1000, "cpu": 50.0, "rss": 2**27}]} for k in range(4)
    ]
    s = session(log, sample_rows=rows)
    m, _v = analyze(s)
    data = trace.build(s, m)
    assert check_trace(data) == []
    assert not [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert len([e for e in data["traceEvents"] if e["ph"] == "C" and e["name"] == "CPU %"]) == 4


def test_a_hang_is_a_span_from_the_last_step_to_the_end() -> None:
    s = _stalled_run(100)
    last = s.primary.t0 + s.primary.steps["t"][-1] / 1e6
    s.meta.update(hang={"silent_s": 12.0, "steps_before": 100}, wall_s=last - 99.0 + 12.5)
    m, _v = analyze(s)
    data = trace.build(s, m)
    assert check_trace(data) == []
    (hang,) = [e for e in data["traceEvents"] if e.get("cat") == "hang"]
    assert hang["name"] == "no progress for 12 s (hang)"
    assert hang["dur"] == 12_500_000


def test_too_many_stacks_keep_those_inside_stalls(monkeypatch: pytest.MonkeyPatch) -> None:
    from trainprof.store.stacks import StackSpan

    monkeypatch.setattr(trace_stacks, "STACK_EVENTS", 200)
    s = _stalled_run(300)
    log = s.primary
    start = log.t0 + (log.steps["t"][0] - log.steps["dur"][0]) / 1e6
    end = log.t0 + log.steps["t"][-1] / 1e6
    mod = ("<module>", "t.py", 1)
    n = int((end - start) / 0.002)  # a sample every 2 ms, alternating between two lines
    s.spans = [
        StackSpan(start + k * 0.002, start + (k + 1) * 0.002, (mod, ("main", "t.py", 5 + k % 2)))
        for k in range(n)
    ]
    m, _v = analyze(s)
    data = trace.build(s, m)
    assert check_trace(data) == []
    frames = begin_end_spans(data["traceEvents"])
    assert 0 < len(frames) <= 200
    stalls = [(st.t0, st.t1) for st in m.activity.stalls]
    origin = data["otherData"]["origin_monotonic_s"]
    for _name, ts, dur, _depth in frames:
        t0, t1 = origin + ts / 1e6, origin + (ts + dur) / 1e6
        assert any(a - 0.002 <= t0 and t1 <= b + 0.002 for a, b in stalls), (t0, t1)
    assert any("only the samples inside stalls" in note for note in data["otherData"]["notes"])


def test_the_device_timeline_is_a_track_of_its_own() -> None:
    s = _stalled_run(40)
    log = s.primary
    # A timed step (DEVICE_FIELDS): its end mark at step 20's end; 3/4/2 ms on the GPU with a
    # 1 ms idle gap; 2.5/3/1.5 ms on the host; 64 MiB allocated.
    end_us = log.steps["t"][20]
    log.add_line(
        f"G {end_us} 20 3000 4000 2000 1000 2500 3000 1500 900 {64 << 20} {80 << 20} {70 << 20}"
    )
    m, _v = analyze(s)
    data = trace.build(s, m)
    assert check_trace(data) == []
    gpu = [e for e in data["traceEvents"] if e.get("cat") == "device"]
    assert [(e["name"], e["dur"]) for e in gpu] == [
        ("GPU forward", 3000),
        ("GPU backward", 4000),
        ("GPU optimizer", 2000),
        ("GPU idle before next step", 1000),
    ]
    origin = data["otherData"]["origin_monotonic_s"]
    batch_mark = log.t0 + (end_us - 7000) / 1e6  # the host's first mark of the step
    assert gpu[0]["ts"] == round((batch_mark - origin) * 1e6)
    assert all(e["tid"] == trace_events.TID_DEVICE for e in gpu)
    (alloc,) = [e for e in data["traceEvents"] if e.get("name") == "CUDA allocated (MiB)"]
    assert alloc["args"] == {"allocated": 64.0}


def test_merged_nodes_keep_processes_apart_when_their_pids_repeat() -> None:
    """Two machines can give their rank processes the same pid: a merged run's trace keeps one
    track per process, named with its node, and the base node's keep their own pids."""
    ranks = []
    for node in (0, 1):
        log = process(60, step_s=0.05, pid=4242)
        log.header.update(role="rank", rank=node, node=node)
        ranks.append(log)
    nodes = [{"node": 1, "aligned_by": "base"}, {"node": 0, "aligned_by": "step ends"}]
    s = session(*ranks, nodes=nodes)
    data = trace.build(s, analyze(s)[0])
    assert check_trace(data) == []
    names = {
        e["pid"]: e["args"]["name"] for e in data["traceEvents"] if e["name"] == "process_name"
    }
    assert names[4242] == "rank 1 (node 1)"  # the base node's pid as it is
    assert names[trace_events.NODE_PID_STRIDE + 4242] == "rank 0 (node 0)"
    steps = {
        e["pid"] for e in data["traceEvents"] if e["ph"] == "X" and e["name"].startswith("step")
    }
    assert steps == {4242, trace_events.NODE_PID_STRIDE + 4242}


def test_each_compile_the_probe_timed_is_a_span_with_its_line_and_reason() -> None:
    from test_rule_thresholds import compiles_log

    log = compiles_log(2, 0.3)
    rec = {"id": "0/2", "reason": "0/1: tensor 'x' size mismatch at index 1", "gave_up": False}
    log.add_line("X " + json.dumps({"t": 9_000_000, "recompile": rec}))
    s = session(log)
    data = trace.build(s, analyze(s)[0])
    assert check_trace(data) == []
    compiles = [e for e in data["traceEvents"] if e.get("cat") == "compile"]
    assert [e["name"] for e in compiles] == ["torch.compile: graph 0/1", "torch.compile: graph 0/2"]
    assert [e["dur"] for e in compiles] == [300_000, 300_000]
    assert compiles[0]["args"]["under"] == "/home/user/proj/train.py:40 (main)"
    assert compiles[1]["args"]["recompiled because"] == rec["reason"]
    assert "recompiled because" not in compiles[0]["args"]


def test_each_gpus_memory_is_a_counter_from_the_loaded_samples() -> None:
    """The renderer reads the Session, not the run directory's files (it has none here)."""
    rows = [
        {
            "t": 100.0 + i,
            "procs": [],
            "gpu": [{"index": 1, "util": 50.0, "mem_used": (i + 1) * 2**20}],
        }
        for i in range(4)
    ]
    s = session(process(100), sample_rows=rows)
    data = trace.build(s, analyze(s)[0])
    assert check_trace(data) == []
    used = [e for e in data["traceEvents"] if e["name"] == "GPU 1 memory used (MiB)"]
    assert [e["args"]["used"] for e in used] == [1.0, 2.0, 3.0, 4.0]
