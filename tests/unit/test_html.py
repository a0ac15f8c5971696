"""The HTML report: one self-contained file (no URL at all), the console's findings, and
well-formed inline SVG plots; the charts say "not measured" instead of drawing zeros."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from typing import Any

from synth import loop_spans, process, session

from trainprof.analysis.findings import Finding, Verdict
from trainprof.analysis.pipeline import analyze
from trainprof.render import html, svg, trace

URL = re.compile(r"(?i)\b(?:https?|ftp|wss?):|//[a-z0-9.-]+\.[a-z]{2,}|url\(|@import")


class Page(HTMLParser):
    """Tags, attribute values and text of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += [(k, v or "") for k, v in attrs]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(page: str) -> Page:
    p = Page()
    p.feed(page)
    p.close()
    return p


def check_page(page: str) -> tuple[Page, list[ET.Element]]:
    """What every report page must be: no external reference of any kind, no script, and
    each inline SVG well-formed XML."""
    p = parse(page)
    assert not URL.search(page), URL.search(page)
    assert not {"script", "link", "img", "iframe", "object", "embed"} & set(p.tags)
    assert not [a for a in p.attrs if a[0] in ("src", "href", "srcset", "action")]
    svgs = [ET.fromstring(block) for block in re.findall(r"<svg\b.*?</svg>", page, re.S)]
    assert len(svgs) == p.tags.count("svg")
    return p, svgs


def _run() -> Any:
    log = process(300, step_s=0.01, wait_s=0.004, sampler_s=0.0005, first_step_s=0.5)
    ts, durs = log.steps["t"], log.steps["dur"]
    t = 0
    for i in range(300):
        d = durs[i] + (250_000 if i and i % 40 == 0 else 0)
        t += d
        ts[i], durs[i] = t, d
    rows = [
        {
            "t": 99.0 + 0.5 * k,
            "procs": [
                {"pid": 1000, "cpu": 95.0, "rss": 2**28 + k * 2**21},
                {"pid": 1001, "cpu": 40.0, "rss": 2**27, "uss": 2**25 + k * 2**22},
            ],
            "gpu": {"unavailable": "no NVIDIA driver (NVML not found)"},
        }
        for k in range(int(t / 1e6 / 0.5) + 4)
    ]
    worker = process(0, role="worker", pid=1001, loader=None)
    worker.header["worker_id"] = 0
    s = session(log, worker, sample_rows=rows, cwd="/home/user/proj")
    m, verdict = analyze(s)
    return s, m, verdict


def test_the_page_is_self_contained_and_holds_every_plot() -> None:
    s, m, verdict = _run()
    page = html.render(s, m, verdict, trace.build(s, m))
    p, svgs = check_page(page)
    assert len(svgs) == 6
    titles = [el.findtext("title") for el in svgs]
    assert titles == [
        "step time over steps",
        "time ledger",
        "data-wait share over time",
        "CPU and GPU utilization",
        "memory per process",
        "timeline",
    ]
    # Stalls are dots coloured by their cause; the ledger bar has a rect per bucket.
    step_chart = svgs[0]
    dots = [g for g in step_chart.iter("g") if "cause-cpu" in (g.get("class") or "")]
    assert len(dots) == 1 and len(list(dots[0].iter("circle"))) == 7
    assert len(list(svgs[1].iter("rect"))) >= 2
    # The worker's memory is drawn (USS, as the growth rule judges workers), with its trend.
    legend = " ".join(t.text or "" for t in svgs[4].iter("text"))
    assert "main RSS" in legend and "worker 0 (pid 1001) USS" in legend
    assert "worker 0 trend +480.0 MiB/min (R² 1.00)" in legend  # 4 MiB every 0.5 s
    # GPU: not measured, said in words (no zero line).
    text = " ".join(p.text)
    assert "GPU not measured: no NVIDIA driver (NVML not found)" in text
    assert "GPU utilization (%)" not in legend
    assert "@media print" in page and "prefers-color-scheme: dark" in page


def test_findings_are_the_console_words_and_are_escaped() -> None:
    s, m, verdict = _run()
    hostile = Finding(
        id="cpu-stall",
        severity="warning",
        title="Training stalls <script>alert(1)</script>",
        evidence=("the loop calls f() at /home/user/proj/train.py:12", "ESC \x1b[31m red"),
        fix=("move it off the loop",),
        where="/home/user/proj/train.py:12 (main)",
        impact=0.5,
    )
    page = html.render(s, m, Verdict((hostile, *verdict.findings), verdict.skipped), {})
    p, _svgs = check_page(page)
    text = " ".join(p.text)
    assert "<script>" not in page and "script" not in p.tags
    assert "Training stalls <script>alert(1)</script>" in text  # shown, as text
    assert "the loop calls f() at train.py:12" in text  # relative, as the console says it
    assert "ESC \\x1b[31m red" in text  # control characters visible, as on the console
    assert "where: train.py:12 (main)" in " ".join(text.split())
    for f in verdict.findings:
        if f.severity != "info":
            assert all(" ".join(e.split()) in " ".join(text.split()) for e in f.evidence)


def test_charts_without_data_say_why() -> None:
    log = process(3, step_s=0.01)  # too few steps for a steady state
    s = session(log)
    m, verdict = analyze(s)
    page = html.render(s, m, verdict, trace.build(s, m))
    _p, svgs = check_page(page)
    msgs = [t.text for el in svgs for t in el.iter("text") if "muted" in (t.get("class") or "")]
    assert "no steady state of steps to plot" in msgs
    assert "not measured: no process samples" in msgs


def test_a_job_with_stack_samples_but_no_step_gets_its_timeline() -> None:
    """A clean-clone CI run: a script that only printed, sampled by py-spy before it ended, had
    stack begin/end marks and nothing else to draw, and the HTML report raised ValueError."""
    s = session(process(0))
    loop_spans(s, {"print('done')": 1.0}, 99.5, 99.7)
    m, verdict = analyze(s)
    data = trace.build(s, m)
    assert not [e for e in data["traceEvents"] if e.get("ph") == "X"]  # stacks only
    _p, svgs = check_page(html.render(s, m, verdict, data))
    timeline = next(el for el in svgs if el.findtext("title") == "timeline")
    assert "Python stack (py-spy)" in " ".join(t.text or "" for t in timeline.iter("text"))


def test_nice_ticks_cover_the_range_with_round_numbers() -> None:
    assert svg.nice_ticks(0, 100) == [0, 20, 40, 60, 80, 100]
    assert svg.nice_ticks(0.0, 0.37)[:3] == [0.0, 0.1, 0.2]
    assert svg.nice_ticks(5, 5) == [5]


def test_write_views_says_where_and_never_raises(
    tmp_path: Any, capsys: Any, monkeypatch: Any
) -> None:
    s, m, verdict = _run()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file").write_text("")
    lines = html.write_views(s, m, verdict, tmp_path / "t.json", tmp_path / "file" / "r.html")
    assert [str(t) for t in lines] == ["trace: t.json (open it in Perfetto UI or chrome://tracing)"]
    err = capsys.readouterr().err
    assert err.startswith(f"trainprof: could not write --html {tmp_path}/file/r.html: ")
    assert err.count("\n") == 1
