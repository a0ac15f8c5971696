"""`trainprof run --trace --html` on the cpu-stall zoo script, for real (one run shared by every
test here and by test_zoo): the trace is valid Trace Event Format and holds the stalls at the
steps the script stalls, with py-spy's stacks of the stalling function under them; the HTML
report is self-contained and says what the console says."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import Result, ZooRun, trainprof_cmd

from trainprof.examples.zoo import script_path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "unit"))
from test_html import check_page  # noqa: E402
from test_trace import begin_end_spans, check_trace  # noqa: E402

pytestmark = pytest.mark.slow

# cpu_stall.py runs refresh_pseudo_labels() after every optimizer step whose count is 29 mod
# 30 (of 210): the step after it, 0-based index 29, 59, ..., 209, carries the stall.
STALL_STEPS = list(range(29, 210, 30))


@pytest.fixture(scope="module")
def run(zoo_run: ZooRun) -> tuple[Result, Path]:
    """test_zoo's run of cpu_stall, which writes views/trace.json and views/report.html too."""
    r = zoo_run("cpu_stall")
    assert r.returncode == 0, r.stderr[-3000:]
    return r, r.run_dir.parent / "views"


@pytest.fixture(scope="module")
def events(run: tuple[Result, Path]) -> list[dict[str, Any]]:
    data = json.loads((run[1] / "trace.json").read_text())
    assert check_trace(data) == []
    return list(data["traceEvents"])


def test_the_report_says_where_it_wrote_them(run: tuple[Result, Path]) -> None:
    r, out = run
    # Relative to where trainprof ran, as every path in the report.
    assert "trace: views/trace.json (open it in Perfetto UI or chrome://tracing)\n" in r.stderr
    assert "HTML report: views/report.html\n" in r.stderr
    assert (out / "trace.json").stat().st_mode & 0o777 == 0o600


def test_the_trace_holds_each_stall_at_its_step(events: list[dict[str, Any]]) -> None:
    stalls = {e["args"]["step"]: e for e in events if e.get("cat") == "stall"}
    assert set(STALL_STEPS) <= set(stalls), sorted(stalls)
    steps = {e["args"]["step"]: e for e in events if e.get("cat") == "step"}
    for i in STALL_STEPS:
        st = stalls[i]
        assert st["name"] == "stall: CPU work in refresh_pseudo_labels()"
        assert st["args"]["where"].endswith("cpu_stall.py:111 (main → refresh_pseudo_labels())")
        assert (st["ts"], st["dur"]) == (steps[i]["ts"], steps[i]["dur"])
        assert st["pid"] == steps[i]["pid"]


def test_stack_samples_of_the_stall_lie_under_it(events: list[dict[str, Any]]) -> None:
    """py-spy's samples, on the probe's clock: refresh_pseudo_labels() is on the stack during
    each stall (py-spy samples at 50 Hz; a stall lasts ~300 ms, so ~15 samples each)."""
    refresh = [
        {"ts": ts, "dur": dur}
        for name, ts, dur, _depth in begin_end_spans(events)
        if name == "refresh_pseudo_labels"
    ]
    assert refresh
    stalls = [e for e in events if e.get("cat") == "stall" and e["args"]["step"] in STALL_STEPS]
    covered = []
    for st in stalls:
        a, b = st["ts"], st["ts"] + st["dur"]
        inside = sum(max(0, min(b, f["ts"] + f["dur"]) - max(a, f["ts"])) for f in refresh)
        covered.append(inside / st["dur"])
    assert sum(c > 0.5 for c in covered) >= len(stalls) - 1, covered
    # And never far outside one: the stacks are on the same clock as the steps.
    for f in refresh:
        assert any(st["ts"] - 50_000 <= f["ts"] <= st["ts"] + st["dur"] for st in stalls), f


def test_the_trace_has_a_track_per_process_and_counters(events: list[dict[str, Any]]) -> None:
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    main = next(pid for pid, n in names.items() if n.startswith("main process"))
    threads = {
        e["args"]["name"] for e in events if e.get("name") == "thread_name" and e["pid"] == main
    }
    assert {
        "steps",
        "phases, stalls, saves, evals, compiles",
        "Python stack (py-spy, main thread)",
    } <= threads
    counters = {(e["pid"], e["name"]) for e in events if e["ph"] == "C"}
    assert (main, "CPU %") in counters and (main, "RSS (MiB)") in counters


def test_the_html_report_holds_the_plots_and_the_findings(run: tuple[Result, Path]) -> None:
    r, out = run
    page, svgs = check_page((out / "report.html").read_text())
    assert len(svgs) == 6
    text = " ".join(" ".join(page.text).split())
    finding = next(f for f in (r.report or {})["findings"] if f["id"] == "cpu-stall")
    assert finding["title"] in text
    for line in finding["evidence"] + finding["fix"]:
        assert " ".join(line.split()).replace(str(out.parent) + "/", "") in text
    assert "timeline" in [el.findtext("title") for el in svgs]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--trace", "-"), "trainprof: --trace needs a file path"),
        (("--html", "."), "trainprof: --html "),
    ],
)
def test_bad_paths_are_one_line_and_exit_2(
    run: tuple[Result, Path], args: tuple[str, str], message: str
) -> None:
    r, _out = run
    proc = subprocess.run(
        trainprof_cmd("report", str(r.run_dir), *args), capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith(message) and proc.stderr.count("\n") == 1, proc.stderr


@pytest.mark.parallel
def test_run_refuses_a_bad_path_before_the_job_starts(tmp_path: Path) -> None:
    proc = subprocess.run(
        trainprof_cmd("run", "--trace", "-", str(script_path("cpu_stall"))),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert (
        proc.stderr
        == "trainprof: --trace needs a file path (`-`, standard output, is for --json)\n"
    )
    assert not (tmp_path / "trainprof-runs").exists()  # no run was started
