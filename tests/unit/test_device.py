"""GPU truth on CPU: the device timeline's bookkeeping with stand-in CUDA events (the one thing
this machine cannot have), and the verdict, the host-side costs and the GPU rules on synthetic
sessions with timed steps."""

from __future__ import annotations

import json

import pytest
from synth import DEFAULT_LOADER, loop_spans, process, session

from trainprof.analysis.pipeline import analyze
from trainprof.probe import device
from trainprof.store.events import ProcessLog
from trainprof.store.session import Session

CUDA = {"device": "cuda", "dtype": "bfloat16", "matmul_precision": "high", "capability": [9, 0]}


class FakeEvent:
    """A CUDA event on a fake GPU clock: recorded at a device time, done once the fake GPU has
    passed it."""

    gpu: dict[str, float] = {"now": 0.0, "done": 0.0}

    def __init__(self) -> None:
        self.at: float | None = None

    def record(self) -> None:
        self.at = self.gpu["now"]

    def query(self) -> bool:
        return self.at is not None and self.at <= self.gpu["done"]

    def elapsed_time(self, end: FakeEvent) -> float:
        assert self.query() and end.query(), "read before the GPU passed the event"
        return (end.at or 0.0) - (self.at or 0.0)  # ms


def drive(
    tl: device.Timeline,
    steps: int,
    step_s: float,
    monkeypatch: pytest.MonkeyPatch,
    micro: int = 1,
    fwd_ms: float = 1.0,
    bwd_ms: float = 4.0,
    wait_ms: float = 0.0,
    gated: bool = False,
) -> None:
    """``steps`` steps on the fake GPU of ``micro`` micro-batches each (the GPU waits ``wait_ms``
    for each batch, then forward ``fwd_ms``, backward ``bwd_ms``), optimizer 6 ms and 2 ms of
    loop code; it runs 5 ms behind the host, whose clock advances ``step_s`` a step. ``gated``:
    marks are made only while ``tl.active``, as the probe's hooks make them."""

    def mark(name: str) -> None:
        if not gated or tl.active:
            tl.mark(name)
        assert tl.active == (tl.current is not None or tl.closing is not None)

    clock = {"now": 0.0}
    monkeypatch.setattr(device, "_clock", lambda: clock["now"])
    gpu = FakeEvent.gpu
    gpu["now"] = gpu["done"] = 0.0
    for _step in range(steps):
        for i in range(micro):
            if i:
                mark("fetch")
            gpu["now"] += wait_ms
            mark("batch")
            gpu["now"] += fwd_ms
            mark("backward")
            gpu["now"] += bwd_ms
        mark("optimizer")
        gpu["now"] += 6.0
        tl.step_ended()
        assert tl.active == (tl.current is not None or tl.closing is not None)
        gpu["now"] += 2.0  # the loop's own work before the next batch
        gpu["done"] = gpu["now"] - 5.0
        clock["now"] += step_s
    gpu["done"] = gpu["now"]
    tl.read_done()


def timed_steps(lines: list[str]) -> list[int]:
    return [int(line.split()[2]) for line in lines]


def test_timed_steps_are_read_only_once_the_gpu_passed_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines: list[str] = []
    made: list[FakeEvent] = []

    def make() -> FakeEvent:
        made.append(FakeEvent())
        return made[-1]

    tl = device.Timeline(make, lambda: (100, 200, 150), lines.append, lambda t: 0)
    drive(tl, 4 * device.EVERY, step_s=1.0, monkeypatch=monkeypatch)
    assert 2 <= len(lines) <= 6, lines
    fields = [int(v) for v in lines[0].split()[1:]]
    # device µs: forward (batch→backward) 1 ms, backward 4, optimizer 6, gap (end→next batch) 2
    assert fields[2:6] == [1000, 4000, 6000, 2000]
    assert fields[10:13] == [100, 200, 150]
    assert fields[13:] == [-1, -1], "one batch a step: no micro-batch data wait"
    assert len(made) <= 2 * 5, "events are reused"


def test_the_stride_is_jittered_so_no_phase_of_a_periodic_loop_is_missed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An H200 run with a loader restarting every 8 steps and a fixed stride of 16 timed only
    # each epoch's first step, never the restart's gap: the idle share came out 30 % low.
    lines: list[str] = []
    tl = device.Timeline(FakeEvent, None, lines.append, lambda t: 0)
    drive(tl, 800, step_s=1.0, monkeypatch=monkeypatch)
    steps = timed_steps(lines)
    strides = [b - a for a, b in zip(steps, steps[1:], strict=False)]
    assert min(strides) >= device.EVERY // 2 and max(strides) <= device.EVERY * 3 // 2
    assert abs(sum(strides) / len(strides) - device.EVERY) < 2
    assert {s % 8 for s in steps} == set(range(8)), "every phase of an 8-step period is timed"


def test_a_fast_loop_times_at_most_max_per_s_steps_a_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines: list[str] = []
    tl = device.Timeline(FakeEvent, None, lines.append, lambda t: 0)
    drive(tl, 4000, step_s=0.001, monkeypatch=monkeypatch)  # 1000 steps/s for 4 s
    assert 2 * device.MAX_PER_S <= len(lines) <= 4 * device.MAX_PER_S + 1, timed_steps(lines)


def test_micro_batches_are_summed_and_the_wait_for_them_is_idle_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Gradient accumulation over 4 micro-batches: forward and backward are summed over them
    (the first micro-batch alone is a quarter of the forward), and the GPU's wait for each later
    micro-batch (fetch → batch) is counted apart, as idle time of the step."""
    lines: list[str] = []
    tl = device.Timeline(FakeEvent, None, lines.append, lambda t: 0)
    # the GPU caught up with the host and waits 0.5 ms for each micro-batch
    drive(tl, 4 * device.EVERY, step_s=1.0, monkeypatch=monkeypatch, micro=4, wait_ms=0.5)
    assert len(lines) >= 2, lines
    for line in lines:
        f = [int(v) for v in line.split()[1:]]
        # forward 4 × 1 ms, backward 4 × 4 ms, optimizer 6, gap 2 + the first batch's 0.5 ms
        assert f[2:6] == [4000, 16000, 6000, 2500], line
        assert f[13] == 1500, "three later micro-batches, 0.5 ms each"
    log = ProcessLog({"pid": 1, "role": "main", "t0": 0.0, "version": 1})
    for line in lines:
        log.add_line(line.strip())
    from trainprof.analysis.device import device_view

    view = device_view(log.device, 0.0, (-1.0, 1e9))
    assert view is not None and view.data_s == pytest.approx(1.5e-3)
    assert view.idle_share == pytest.approx((2.5 + 1.5) / (4 + 16 + 6 + 2.5 + 1.5))


@pytest.mark.parametrize("micro", [1, 4])
def test_marks_skipped_while_inactive_change_nothing(
    monkeypatch: pytest.MonkeyPatch, micro: int
) -> None:
    """The hooks call ``mark`` only while ``tl.active`` (most steps are not timed): the same
    steps are timed and read the same as with every mark made."""
    lines: dict[bool, list[str]] = {False: [], True: []}
    for gated in (False, True):
        tl = device.Timeline(FakeEvent, None, lines[gated].append, lambda t: 0)
        drive(tl, 6 * device.EVERY, 1.0, monkeypatch, micro=micro, wait_ms=0.5, gated=gated)
    assert len(lines[True]) >= 3
    assert lines[True] == lines[False]


def test_a_long_accumulation_still_closes_its_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """More micro-batches than MAX_MARKS: the ones not marked count as backward (compute), not
    as a wait for data, and the optimizer and end marks are still recorded (the step is read)."""
    lines: list[str] = []
    tl = device.Timeline(FakeEvent, None, lines.append, lambda t: 0)
    drive(tl, 3 * device.EVERY, 1.0, monkeypatch, micro=device.MAX_MARKS, fwd_ms=0.1, bwd_ms=0.2)
    assert lines
    for line in lines:
        f = [int(v) for v in line.split()[1:]]
        assert f[4:6] == [6000, 2000], line
        assert f[2] + f[3] == pytest.approx(device.MAX_MARKS * 300, abs=50), line
        assert f[13] == 0, line


def test_a_started_timeline_marks_a_real_optimizers_steps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The probe's wiring with a real torch optimizer: starting the timeline keeps torch's
    pre-step hook registration (a wrong name there once lost every GPU job's precision facts,
    and the timeline its optimizer phase), the post-hook registers the pre-step hook around each
    timed step only, and each timed step is marked by the pre- and post-hooks."""
    import torch
    import torch.optim.optimizer as optim_mod

    from trainprof.probe import device_marks, steps
    from trainprof.probe.state import State, state

    class Writer:
        steps: list[object] = []
        step_check_at = float("inf")

        def steps_queued(self, now: float) -> None:
            pass

        def add(self, line: str) -> None:
            pass

        def us(self, t: float) -> int:
            return 0

    class Event(FakeEvent):
        def record(self) -> None:
            self.at = 0.0

        def elapsed_time(self, end: FakeEvent) -> float:
            return 1.0

    lines: list[str] = []
    clock = {"now": 0.0}

    def tick() -> float:
        clock["now"] += 1.0
        return clock["now"]

    monkeypatch.setattr(device, "_clock", tick)
    fresh = State()  # a new process's, in place: the hook modules hold the one by name
    for name in State.__slots__:
        monkeypatch.setattr(state, name, getattr(fresh, name))
    monkeypatch.setattr(
        device_marks,
        "cuda_timeline",
        lambda torch, dev, emit, us: device.Timeline(Event, None, lines.append, lambda t: 0),
    )
    state.writer = Writer()
    before = set(optim_mod._global_optimizer_pre_hooks)
    post = optim_mod.register_optimizer_step_post_hook(steps._on_optimizer_step)
    try:
        device_marks.start_timeline(torch, torch.device("cpu"))
        device_marks.start_timeline(torch, torch.device("cpu"))  # once only
        assert set(optim_mod._global_optimizer_pre_hooks) == before  # none before a timed step
        param = torch.nn.Parameter(torch.zeros(2))
        opt = torch.optim.SGD([param], lr=0.1)
        registered: list[list[object]] = []  # the probe's pre-step hooks before each step
        for _ in range(5 * device.EVERY):
            hooks = optim_mod._global_optimizer_pre_hooks
            registered.append([hooks[k] for k in set(hooks) - before])
            param.grad = torch.ones(2)
            opt.step()
    finally:
        post.remove()
        for k in set(optim_mod._global_optimizer_pre_hooks) - before:
            del optim_mod._global_optimizer_pre_hooks[k]
    assert state.steps == 5 * device.EVERY
    assert len(lines) >= 3, lines
    for line in lines:
        assert int(line.split()[5]) == 1000, f"the optimizer phase is timed: {line}"
    # in place for a timed step and the step that closes its gap, never twice, else gone
    assert {len(r) for r in registered} == {0, 1}
    assert all(r == [device_marks._before_optimizer_step] for r in registered if r)
    assert len(lines) <= sum(map(len, registered)) <= 2 * len(lines) + 2
    # The post-hook counts an untimed step inline instead of calling step_ended: the same
    # steps are timed as by a timeline that calls it on every step.
    ref_lines: list[str] = []
    ref = device.Timeline(Event, None, ref_lines.append, lambda t: 0)
    for _ in range(5 * device.EVERY):
        if ref.active:
            ref.mark("optimizer")
        ref.step_ended()
    assert timed_steps(lines) == timed_steps(ref_lines)


def test_a_timeline_error_never_reaches_the_job() -> None:
    class Broken(FakeEvent):
        def record(self) -> None:
            raise RuntimeError("CUDA error: device-side assert")

    from trainprof.probe import device_marks
    from trainprof.probe.state import state

    state.timeline = device.Timeline(Broken, None, lambda _l: None, lambda t: 0)
    state.timeline.current = []
    device_marks.mark(state.timeline, "batch")
    assert state.timeline is None


def gpu_session(
    fwd_ms: float, gap_ms: float, util: float | None = None, wait_s: float = 0.0, fp32: bool = False
) -> Session:
    log = process(200, step_s=0.02, wait_s=wait_s, loader=dict(DEFAULT_LOADER, pin_memory=True))
    precision = dict(CUDA, dtype="float32", matmul_precision="highest") if fp32 else CUDA
    log.add_line("X " + json.dumps({"t": 1, "precision": precision}))
    if not fp32:
        log.add_line("X " + json.dumps({"t": 1, "autocast": "cuda", "dtype": "torch.bfloat16"}))
    for i in range(16, 200, 16):
        t = log.steps["t"][i]
        us = (int(fwd_ms * 1e3), 8000, 2000, int(gap_ms * 1e3))
        log.add_line(f"G {t} {i} {' '.join(map(str, us))} 5000 8000 2000 {int(gap_ms * 1e3)} 1 2 3")
    rows = None
    if util is not None:
        rows = [
            {"t": 100.0 + i, "procs": [], "gpu": [{"index": 0, "util": util}]} for i in range(8)
        ]
    return session(log, sample_rows=rows)


def test_gpu_bound_job_is_named_and_its_host_work_costs_nothing() -> None:
    s = gpu_session(fwd_ms=9.0, gap_ms=0.5, util=97.0)
    loop_spans(s, {"running_loss += loss.item()": 0.8, "model(x)": 0.2}, 102.5, 105.5)
    m, verdict = analyze(s)
    assert m.bottleneck is not None and m.bottleneck.verdict == "gpu-bound"
    assert m.device is not None and m.device.idle_share is not None and m.device.idle_share < 0.05
    assert not {"host-sync", "loop-overhead", "input-bound"} & {f.id for f in verdict.findings}


def test_an_idle_gpu_waiting_on_data_is_input_bound_and_costs_the_idle_time() -> None:
    m, verdict = analyze(gpu_session(fwd_ms=3.0, gap_ms=12.0, util=35.0, wait_s=0.012))
    assert m.bottleneck is not None and m.bottleneck.verdict == "input-bound"
    f = next(f for f in verdict.findings if f.id == "input-bound")
    idle = m.device_idle
    assert idle is not None and f.impact is not None and f.impact <= idle + 1e-9


def test_launch_bound_when_nothing_else_explains_an_idle_gpu() -> None:
    m, verdict = analyze(gpu_session(fwd_ms=9.0, gap_ms=0.5, util=20.0))
    assert verdict.findings and verdict.findings[0].id == "launch-bound"
    assert m.bottleneck is not None and m.bottleneck.verdict == "host-bound"


def test_launch_bound_quiet_on_a_busy_gpu_and_skipped_without_nvml() -> None:
    _m, busy = analyze(gpu_session(fwd_ms=9.0, gap_ms=0.5, util=60.0))
    assert "launch-bound" not in {f.id for f in busy.findings}
    _m, unmeasured = analyze(gpu_session(fwd_ms=9.0, gap_ms=0.5))
    assert "launch-bound" in {s.id for s in unmeasured.skipped}


def cuda_memory(mb_per_step: float) -> Session:
    log = gpu_session(fwd_ms=9.0, gap_ms=0.5).processes[0]
    log.device = [
        (*row[:10], int((500 + mb_per_step * row[1]) * 2**20), 2**31, 2**31, -1, -1)
        for row in log.device
    ]
    return session(log)


def test_cuda_memory_creep_is_found_and_a_flat_one_is_not() -> None:
    assert "cuda-memory-growth" in {f.id for f in analyze(cuda_memory(1.0))[1].findings}
    assert "cuda-memory-growth" not in {f.id for f in analyze(cuda_memory(0.1))[1].findings}


def test_cpu_jobs_get_no_verdict_and_no_device_view() -> None:
    m, _verdict = analyze(session(process(100)))
    assert m.bottleneck is None and m.device is None and m.device_idle is None


def test_device_records_parse_and_torn_ones_are_counted() -> None:
    log = ProcessLog({"pid": 1, "t0": 0.0})
    log.add_line("G 100 16 1000 2000 300 50 900 1500 200 400 10 20 30")
    log.add_line("G 1 2 3")
    # a record written before micro-batches were timed reads as "one batch a step"
    assert log.device == [(100, 16, 1000, 2000, 300, 50, 900, 1500, 200, 400, 10, 20, 30, -1, -1)]
    assert log.bad_lines == 1


class StandInCuda:
    """``torch.cuda`` as the timeline uses it, on a machine with two GPUs whose current device
    is 0: it records which device each call names (``None``: the current one)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []
        cuda = self

        class Event(FakeEvent):
            def __init__(self, enable_timing: bool = False) -> None:
                assert enable_timing, "an event without timing has no elapsed_time"
                super().__init__()

            def record(self, stream: object = None) -> None:  # type: ignore[override]
                cuda.calls.append(("record", stream))
                super().record()

        self.Event = Event

    def current_stream(self, device: object = None) -> str:
        return f"stream of {device}"

    def is_current_stream_capturing(self) -> bool:
        return False

    def memory_stats_as_nested_dict(self, device: object = None) -> dict[str, object]:
        self.calls.append(("memory", device))
        return {
            "allocated_bytes": {"all": {"current": 10, "peak": 30}},
            "reserved_bytes": {"all": {"current": 20, "peak": 40}},
        }


def test_cuda_memory_is_read_with_one_allocator_call() -> None:
    class Torch:
        cuda = StandInCuda()

    tl = device.cuda_timeline(Torch, "cuda:0", lambda _l: None, lambda t: 0)
    assert tl.memory is not None and tl.memory() == (10, 20, 30)
    assert Torch.cuda.calls == [("memory", "cuda:0")]


def test_the_timeline_names_the_models_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job training on cuda:1 without torch.cuda.set_device: every event goes on cuda:1's
    current stream and memory is read for cuda:1, never the current device (an event there
    would time an idle GPU and create a CUDA context on GPU 0)."""

    class Torch:
        cuda = StandInCuda()

    lines: list[str] = []
    tl = device.cuda_timeline(Torch, "cuda:1", lines.append, lambda t: 0)
    drive(tl, 4 * device.EVERY, step_s=1.0, monkeypatch=monkeypatch)
    assert lines, "no timed step"
    assert {what for what, _ in Torch.cuda.calls} == {"record", "memory"}
    assert set(Torch.cuda.calls) == {("record", "stream of cuda:1"), ("memory", "cuda:1")}


def test_no_cuda_call_inside_a_graph_capture(monkeypatch: pytest.MonkeyPatch) -> None:
    """A whole step captured with torch.cuda.graph runs the probe's hooks inside the capture:
    an event query there is illegal and would break the user's capture, so the timeline makes
    no CUDA call while capturing, drops the step it cut, and goes on after it."""
    capture = {"on": False}

    class CaptureChecked(FakeEvent):
        def record(self) -> None:
            assert not capture["on"], "event recorded inside a capture"
            super().record()

        def query(self) -> bool:
            assert not capture["on"], "event queried inside a capture"
            return super().query()

    lines: list[str] = []
    tl = device.Timeline(CaptureChecked, None, lines.append, lambda t: 0, lambda: capture["on"])
    clock = {"now": 0.0}
    monkeypatch.setattr(device, "_clock", lambda: clock["now"])
    gpu = FakeEvent.gpu
    gpu["now"] = gpu["done"] = 0.0
    for step in range(200):
        capture["on"] = 40 <= step < 60  # warm-up done, the step is captured, then replayed
        for name, ms in (("batch", 1.0), ("backward", 4.0), ("optimizer", 6.0)):
            tl.mark(name)
            gpu["now"] += ms
        tl.step_ended()
        gpu["now"] += 2.0
        gpu["done"] = gpu["now"] - 5.0
        clock["now"] += 1.0
    capture["on"] = False
    gpu["done"] = gpu["now"]
    tl.read_done()
    steps = timed_steps(lines)
    assert any(s < 40 for s in steps) and any(s >= 60 for s in steps), steps
    assert not any(40 <= s < 60 for s in steps), steps
    for line in lines:
        assert [int(v) for v in line.split()[3:7]] == [1000, 4000, 6000, 2000], line


def test_a_stopped_timeline_is_said_in_the_report_and_the_json() -> None:
    from rich.console import Console

    from trainprof.render.console import summary_table
    from trainprof.render.json_report import report_dict

    s = gpu_session(fwd_ms=9.0, gap_ms=0.5, util=97.0)
    error = "RuntimeError: CUDA error: operation not permitted when stream is capturing"
    s.processes[0].add_line("X " + json.dumps({"t": 5, "device_timeline_error": error}))
    m, verdict = analyze(s)
    assert report_dict({}, m, verdict)["summary"]["device_timeline_error"] == error
    console = Console(record=True, width=200, color_system=None)
    console.print(summary_table({}, m))
    assert f"device timeline stopped: {error}" in console.export_text()


def test_fp32_warns_where_the_gpu_bounds_the_job_and_informs_where_it_waits() -> None:
    def severity(util: float) -> str:
        _m, verdict = analyze(gpu_session(fwd_ms=9.0, gap_ms=0.5, util=util, fp32=True))
        return next(f.severity for f in verdict.findings if f.id == "no-mixed-precision")

    assert severity(97.0) == "warning"  # gpu-bound: faster math is the speed-up
    assert severity(20.0) == "info"  # launch-bound: the GPU waits for the host anyway


def test_a_host_bound_verdict_names_the_host_work_that_holds_the_gpu() -> None:
    s = gpu_session(fwd_ms=9.0, gap_ms=6.0, util=59.0)
    loop_spans(s, {"norms.append(p.grad.norm().item())": 0.8, "model(x)": 0.2}, 102.5, 105.5)
    m, _verdict = analyze(s)
    assert m.bottleneck is not None and m.bottleneck.verdict == "host-bound"
    assert "device→host syncs" in m.bottleneck.reason, m.bottleneck.reason


def test_a_mixed_verdict_names_what_was_measured() -> None:
    from trainprof.analysis.device import bottleneck

    # an idle share between gpu-bound and the rest, data 13 % of the loop, no host work seen
    b = bottleneck(idle=0.12, util=70.0, data_share=0.13, host_share=0.0)
    assert b is not None and b.verdict == "mixed"
    assert b.reason == (
        "the GPU sat idle 12% of each step; the loop waited for data 13% and ran host work 0% "
        "of its time"
    )
    both = bottleneck(idle=0.4, util=50.0, data_share=0.3, host_share=0.25)
    assert both is not None and both.verdict == "mixed" and "data 30%" in both.reason
