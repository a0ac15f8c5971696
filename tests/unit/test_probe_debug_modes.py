"""The probe's reading of torch's debug switches, in this process with real torch: where anomaly
detection was turned on, its state at the first step, and a change read at a writer tick."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainprof.analysis import debug_modes as analysis
from trainprof.probe import debug_modes, records
from trainprof.probe.writer import EventWriter
from trainprof.store.events import load_processes

torch = pytest.importorskip("torch")


@pytest.fixture
def writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EventWriter]:
    w = EventWriter(str(tmp_path))
    monkeypatch.setattr(records, "_writer", w)
    monkeypatch.setattr(debug_modes, "_state", debug_modes._State())
    monkeypatch.setattr(torch, "set_anomaly_enabled", torch.set_anomaly_enabled)  # restored
    profiler = torch.autograd.profiler
    monkeypatch.setattr(profiler, "_run_on_profiler_start", profiler._run_on_profiler_start)
    monkeypatch.setenv("CUDA_LAUNCH_BLOCKING", "1")
    yield w
    torch.autograd.set_detect_anomaly(False)


def test_turned_on_then_off_is_read_with_its_line(writer: EventWriter, tmp_path: Path) -> None:
    debug_modes.install(torch)
    torch.autograd.set_detect_anomaly(True)
    line = _line_of("torch.autograd.set_detect_anomaly(True)")
    debug_modes.at_first_step()
    writer.run_ticks()  # unchanged: nothing recorded
    torch.autograd.set_detect_anomaly(False)
    writer.run_ticks()  # the change
    writer.close()
    (log,) = load_processes(str(tmp_path))
    modes = analysis.read(log)
    assert modes is not None
    assert [r.anomaly for r in modes.readings] == [True, False]
    assert modes.checks_nan() and modes.launch_blocking_on
    assert modes.anomaly_at is not None
    assert modes.anomaly_at[1] == os.path.abspath(__file__) and modes.anomaly_at[2] == line


def _line_of(text: str) -> int:
    with open(__file__, encoding="utf-8") as f:
        return next(i for i, ln in enumerate(f, 1) if ln.strip() == text)


def test_a_profiler_recording_is_read_at_the_ticks(writer: EventWriter, tmp_path: Path) -> None:
    debug_modes.install(torch)
    debug_modes.at_first_step()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        writer.run_ticks()
    line = _line_of(
        "with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):"
    )
    writer.run_ticks()
    writer.close()
    (log,) = load_processes(str(tmp_path))
    modes = analysis.read(log)
    assert modes is not None
    assert [r.profiler for r in modes.readings] == [False, True, False]
    assert not any(r.anomaly for r in modes.readings)
    assert modes.profiler_at is not None and modes.profiler_at[2] == line


def test_torch_own_anomaly_block_while_compiling_is_not_the_switch(
    writer: EventWriter, tmp_path: Path
) -> None:
    debug_modes.install(torch)
    debug_modes.at_first_step()
    seen: list[bool] = []
    writer.on_tick.append(lambda: seen.append(torch.is_anomaly_enabled()))

    def traced(x: torch.Tensor) -> torch.Tensor:
        writer.run_ticks()  # a tick while AOTAutograd traces the joint graph
        return (x * 2).sum()

    from functorch.compile import aot_function, nop

    x = torch.randn(4, requires_grad=True)
    aot_function(traced, fw_compiler=nop)(x).backward()
    assert True in seen  # a tick did see torch's block open
    writer.close()
    (log,) = load_processes(str(tmp_path))
    modes = analysis.read(log)
    assert modes is not None
    assert not any(r.anomaly for r in modes.readings)
    assert modes.anomaly_at is None
