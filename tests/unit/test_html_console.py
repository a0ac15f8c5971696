"""The console summary the HTML report reuses: the step-time sparkline carries its scale, and
fits a narrow terminal by re-binning rather than folding; the summary never overflows."""

from __future__ import annotations

import io

from rich.cells import cell_len
from rich.console import Console
from synth import process, session

from trainprof.analysis.pipeline import analyze
from trainprof.render import console as console_render


def _render(renderable: object, width: int) -> list[str]:
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None).print(renderable)
    return buf.getvalue().splitlines()


def test_the_sparkline_is_scaled_by_its_lowest_and_highest_bar() -> None:
    values = [0.010] * 10 + [0.250] + [0.010] * 10
    (line,) = _render(console_render.SparkScale(values, 21), 80)
    assert line.startswith("10.0 ms ▁")
    assert "█" in line and line.endswith(" 250.0 ms")


def test_bins_of_several_steps_say_so() -> None:
    lines = _render(console_render.SparkScale([0.01, 0.02] * 24, 480), 120)
    assert lines == [f"10.0 ms {'▁█' * 24} 20.0 ms  (a bar: the mean of ~10 steps)"]


def test_a_narrow_terminal_gets_fewer_bars_never_a_folded_scale() -> None:
    values = [0.010 + 0.001 * (i % 7) for i in range(48)]
    lines = _render(console_render.SparkScale(values, 480), 40)
    assert all(cell_len(ln) <= 40 for ln in lines)
    first = lines[0]
    assert first.startswith("10.") and first.endswith(" ms")  # both ends of the scale, whole
    bars = sum(ch in console_render.SPARK for ch in first)
    assert 8 <= bars < 48
    assert lines[1].startswith("(a bar: the mean of ~")


def test_the_summary_fits_a_narrow_terminal() -> None:
    log = process(200, step_s=0.01, wait_s=0.002)
    s = session(log)
    m, _verdict = analyze(s)
    for width in (40, 60, 100):
        lines = _render(console_render.summary_table(s.meta, m), width)
        assert all(cell_len(ln) <= width for ln in lines), width
        assert any("step times" in ln for ln in lines)
