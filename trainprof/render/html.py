"""The report as one self-contained HTML file: the console's summary and findings, and plots.

No script, no web font, no image file, no URL: the page is the file, so it opens offline and
attached to an email or an issue. The summary and the time ledger are the console renderer's
own tables (rendered without colour); the findings are the same Finding fields the console
prints, cleaned and made relative the same way. Plots are inline SVG (``render.svg``) whose
colours come from this page's stylesheet, which has a dark variant (``prefers-color-scheme``)
and a print variant (``@media print``).
"""

from __future__ import annotations

import io
import math
import sys
import zlib
from html import escape
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from trainprof.analysis import ledger
from trainprof.analysis.findings import Finding, Verdict
from trainprof.analysis.memory import MIN_R2
from trainprof.analysis.metrics import Metrics
from trainprof.errors import TrainprofError
from trainprof.render import console as console_render
from trainprof.render import svg, trace
from trainprof.render.text import clean, literal, shell_join
from trainprof.store.rundir import check_user_file, write_user_file
from trainprof.store.session import Session
from trainprof.version import __version__

MIB = 1024 * 1024
STEP_POINTS = 1500  # step-time chart: beyond, per-bin means (and maxima) of steps
WAIT_BINS = 120
TIMELINE_DEPTH = 7  # stack frames drawn in the timeline, outermost first
CAUSES = ("cpu", "blocked", "wait", "compile", "sync", "data", "eval", "checkpoint")


def check_view_path(path: Path, option: str) -> None:
    """Before any work: a file path that can be written (not ``-``: stdout holds the report)."""
    if str(path) == "-":
        raise TrainprofError(f"{option} needs a file path (`-`, standard output, is for --json)")
    check_user_file(path, option)


def write_views(
    session: Session,
    m: Metrics,
    verdict: Verdict,
    trace_path: Path | None,
    html_path: Path | None,
) -> list[Text]:
    """Write the trace and/or the HTML report (one trace serves both); the lines that say where
    they went. A file that cannot be written is one line on stderr, as ``--json`` does: the
    run directory still holds everything to write it again with ``trainprof report``."""
    if trace_path is None and html_path is None:
        return []
    data = trace.build(session, m)
    jobs: list[tuple[Path, str, str, str]] = []
    if trace_path is not None:
        jobs.append((trace_path, "--trace", "trace", trace.dumps(data)))
    if html_path is not None:
        jobs.append((html_path, "--html", "HTML report", render(session, m, verdict, data)))
    lines: list[Text] = []
    for path, option, what, text in jobs:
        try:
            write_user_file(path, text)
        except OSError as exc:
            print(f"trainprof: could not write {option} {path}: {exc.strerror}", file=sys.stderr)
            continue
        shown = console_render.relative_to(str(Path.cwd()))(str(path.absolute()))
        hint = " (open it in Perfetto UI or chrome://tracing)" if option == "--trace" else ""
        lines.append(literal(f"{what}: {shown}{hint}", style="dim"))
    return lines


def _origin(data: dict[str, Any]) -> float:
    """The trace's time zero (the launch), on the monotonic clock."""
    return float(data.get("otherData", {}).get("origin_monotonic_s", 0.0))


# ---- the page ------------------------------------------------------------------------------


def render(session: Session, m: Metrics, verdict: Verdict, trace_data: dict[str, Any]) -> str:
    meta = session.meta
    command = [str(a) for a in meta.get("command", [])]
    if command:
        command[0] = Path(command[0]).name
    title = f"trainprof report: {shell_join(command)}" if command else "trainprof report"
    origin = _origin(trace_data)
    body = [
        f"<h1>{escape(clean(title))}</h1>",
        '<section class="console">',
        _pre(
            Panel(
                console_render.summary_table(meta, m), title="trainprof report", title_align="left"
            )
        ),
    ]
    time_box = console_render.ledger_table(m, verdict)
    if time_box is not None:
        body.append(_pre(Panel(time_box, title="where the time went", title_align="left")))
    body.append("</section>")
    body.append(_findings(verdict, meta, m))
    body.append("<h2>Plots</h2>")
    for heading, chart in _charts(session, m, verdict, trace_data, origin):
        body.append(f"<figure><figcaption>{escape(clean(heading))}</figcaption>{chart}</figure>")
    run_dir = console_render.relative_to(meta.get("cwd"))(
        str(meta.get("run_dir") or session.run_dir)
    )
    body.append(
        f"<footer>run directory: <code>{escape(clean(run_dir))}</code> · written by trainprof "
        f"{escape(__version__)} · times are seconds since the job's launch</footer>"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="color-scheme" content="light dark">\n'
        f"<title>{escape(clean(title))}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )


def _pre(renderable: Any) -> str:
    """A rich renderable as the console prints it, without colour, 100 columns wide."""
    buf = io.StringIO()
    con = Console(
        file=buf, width=100, color_system=None, highlight=False, markup=False, emoji=False
    )
    con.print(renderable)
    lines = buf.getvalue().rstrip().split("\n")  # each line cleaned: they keep their breaks
    return "<pre>" + "\n".join(escape(clean(line)) for line in lines) + "</pre>"


def _findings(verdict: Verdict, meta: dict[str, Any], m: Metrics) -> str:
    """The findings with the console's words: headline, where, hot line, evidence, fixes."""
    rel = console_render.relative_to(meta.get("cwd"))
    shown = [f for f in verdict.findings if f.severity != "info"]
    info = [f for f in verdict.findings if f.severity == "info"]
    out = ['<section class="findings"><h2>Findings</h2>']
    if not shown:
        text, ok = console_render.quiet_note(meta, m)
        out.append(f'<p class="{"ok" if ok else "warning"}">{escape(clean(text))}</p>')
    out.append("<ol>")
    out.extend(_finding(f, rel) for f in shown)
    out.append("</ol>")
    if info:
        out.append(f"<details><summary>{len(info)} info findings</summary><ol>")
        out.extend(_finding(f, rel) for f in info)
        out.append("</ol></details>")
    if verdict.skipped:
        out.append(f"<details><summary>{len(verdict.skipped)} rules skipped</summary><ul>")
        out.extend(
            f"<li><code>{escape(clean(s.id))}</code>: {escape(clean(s.reason))}</li>"
            for s in verdict.skipped
        )
        out.append("</ul></details>")
    out.append("</section>")
    return "\n".join(out)


def _finding(f: Finding, rel: Any) -> str:
    impact = f", ~{f.impact:.0%} of time" if f.impact is not None else ""
    parts = [
        f'<li class="finding" id="finding-{escape(f.id)}">',
        f'<p class="head"><span class="sev {f.severity}">[{f.severity}]</span> '
        f"<strong>{escape(clean(f.title))}</strong> "
        f'<span class="muted">({escape(clean(f.id))}{impact})</span></p>',
    ]
    if f.where:
        parts.append(f'<p class="where">where: <code>{escape(rel(clean(f.where)))}</code></p>')
    if f.hotspot:
        parts.append(f'<p class="where">hot line: <code>{escape(rel(clean(f.hotspot)))}</code></p>')
    if f.evidence:
        parts.append('<ul class="evidence">')
        parts.extend(f"<li>{escape(rel(clean(e)))}</li>" for e in f.evidence)
        parts.append("</ul>")
    if f.fix:
        parts.append('<ul class="fix">')
        parts.extend(f"<li>{escape(rel(clean(x)))}</li>" for x in f.fix)
        parts.append("</ul>")
    parts.append("</li>")
    return "\n".join(parts)


# ---- the plots -----------------------------------------------------------------------------


def _charts(
    session: Session, m: Metrics, verdict: Verdict, data: dict[str, Any], origin: float
) -> list[tuple[str, str]]:
    return [
        ("Step time over steps, stalls coloured by cause", _step_chart(session, m)),
        ("Where the steady time went (the time ledger)", _ledger_chart(m, verdict)),
        ("Data-wait share over time", _wait_chart(session, m, origin)),
        ("CPU and GPU utilization over time", _util_chart(session, m, origin)),
        ("Memory per process, with the growth trend", _memory_chart(session, m, origin)),
        ("Timeline (the trace, drawn): stalls, steps and Python stacks", _timeline(m, data)),
    ]


def _step_chart(session: Session, m: Metrics) -> str:
    title = "step time over steps"
    log = session.primary
    if log is None or m.steady is None:
        return svg.message(title, "no steady state of steps to plot")
    durs = log.steps["dur"] if log.n_steps else []
    first = m.warmup_steps
    pts = [(float(i), durs[i] / 1e3) for i in range(first, len(durs))]
    series: list[svg.Series] = []
    if len(pts) > STEP_POINTS:
        size = math.ceil(len(pts) / STEP_POINTS)
        chunks = [pts[i : i + size] for i in range(0, len(pts), size)]
        series.append(
            svg.Series("bin max", [(c[-1][0], max(p[1] for p in c)) for c in chunks], "s1")
        )
        series.append(
            svg.Series(
                "step time (bin mean)",
                [(c[-1][0], sum(p[1] for p in c) / len(c)) for c in chunks],
                "s0",
            )
        )
    else:
        series.append(svg.Series("step time", pts, "s0"))
    stalls = m.activity.stalls
    for cause in CAUSES:
        dots = [(float(st.index), durs[st.index] / 1e3) for st in stalls if st.cause == cause]
        if dots:
            series.append(
                svg.Series(f"stall: {trace.CAUSE[cause]}", dots, f"cause-{cause}", "dots")
            )
    p50 = m.steady.p50_s * 1e3
    return svg.line_chart(
        title,
        series,
        f"optimizer step (warm-up excluded: first {first})",
        "step time (ms)",
        hlines=[(p50, f"p50 {p50:.1f} ms")],
    )


def _ledger_chart(m: Metrics, verdict: Verdict) -> str:
    title = "time ledger"
    led = m.ledger
    if led is None:
        return svg.message(title, "no steady state: no time ledger")
    owner = {b: f.id for f in verdict.findings for b, _s in f.claimed}
    bars = []
    for group, buckets in console_render.LEDGER_GROUPS:
        for b in buckets:
            share = led.share(b)
            if share >= 0.005:
                what = ledger.label(b, m.streams_data)
                label = f"{group}: {what}" if group else what
                bars.append(svg.Bar(label, share, f"k-{b}", owner.get(b, "")))
    return svg.stacked_bar(title, bars)


def _wait_chart(session: Session, m: Metrics, origin: float) -> str:
    title = "data-wait share over time"
    log = session.primary
    if log is None or m.steady is None:
        return svg.message(title, "no steady state of steps to plot")
    if m.steady.data_wait_frac is None:
        return svg.message(title, "not measured: no torch DataLoader was iterated")
    ts, durs, waits = log.steps["t"], log.steps["dur"], log.steps["wait"]
    first, n = m.warmup_steps, len(ts)
    size = max(1, math.ceil((n - first) / WAIT_BINS))
    pts = []
    for a in range(first, n, size):
        b = min(n, a + size)
        total = sum(durs[i] for i in range(a, b))
        if total > 0:
            t = log.t0 + ts[b - 1] / 1e6 - origin
            pts.append((t, 100.0 * min(1.0, sum(waits[i] for i in range(a, b)) / total)))
    note = f"{size} steps a point" if size > 1 else "one point a step"
    return svg.line_chart(
        title,
        [svg.Series(f"data wait, % of step time ({note})", pts, "s2")],
        "seconds since launch",
        "% of step time",
        y_max=100.0,
    )


def _util_chart(session: Session, m: Metrics, origin: float) -> str:
    s = session.samples
    t = [x - origin for x in s.t]
    series = [
        svg.Series(
            "CPU, job and workers (% of one core)", list(zip(t, s.tree_cpu, strict=True)), "s0"
        )
    ]
    gpu = [(x, v) for x, v in zip(t, s.gpu_util, strict=True) if not math.isnan(v)]
    if gpu:
        series.append(svg.Series("GPU utilization (%)", gpu, "s3"))
    finite_cpu = [v for v in s.tree_cpu if not math.isnan(v)]
    top = max([100.0, *finite_cpu])
    chart = svg.line_chart(
        "CPU and GPU utilization", series, "seconds since launch", "%", y_max=top
    )
    if not gpu:
        why = m.gpu_unavailable or "no GPU samples"
        chart += f'\n<p class="muted">GPU not measured: {escape(clean(why))}</p>'
    return chart


def _memory_chart(session: Session, m: Metrics, origin: float) -> str:
    s = session.samples
    # The host samples are the base node's (a merged run): its processes, not another
    # machine's that happen to have the same pid.
    base = trace.base_node(session)
    roles = {p.pid: p for p in session.processes if p.header.get("node") in (None, base)}
    series: list[svg.Series] = []
    growths = {g.pid: g for g in m.activity.growths}
    for k, (pid, proc) in enumerate(sorted(s.procs.items())):
        log = roles.get(pid)
        role = log.role if log else "other"
        g = growths.get(pid)
        use_uss = g is not None and g.metric == "uss"
        values = proc.uss if use_uss else proc.rss
        who = _proc_label(log, pid, proc.name)
        label = f"{who} {'USS' if use_uss else 'RSS'}"
        pts = [
            (t - origin, v / MIB) for t, v in zip(proc.t, values, strict=True) if not math.isnan(v)
        ]
        if not pts:
            continue
        cls = "s0" if role == "main" else f"s{1 + k % 5}"
        series.append(svg.Series(label, pts, cls))
        if g is not None and g.line is not None and g.r2 >= MIN_R2:
            (a, ya), (b, yb) = g.line
            rate = g.bytes_per_s * 60 / MIB
            series.append(
                svg.Series(
                    f"{who.split(' (')[0]} trend {rate:+.1f} MiB/min (R² {g.r2:.2f})",
                    [(a - origin, ya / MIB), (b - origin, yb / MIB)],
                    cls,
                    "dashed",
                )
            )
    if not series:
        return svg.message("memory per process", "not measured: no process samples")
    return svg.line_chart("memory per process", series, "seconds since launch", "MiB")


def _proc_label(log: Any, pid: int, name: str) -> str:
    if log is None:
        return f"{name or 'process'} {pid}"
    if log.role == "worker":
        return f"worker {log.header.get('worker_id', '?')} (pid {pid})"
    if log.role == "rank":
        return f"rank {log.header.get('rank')}"
    return "main"


# ---- the timeline: the trace's own events, drawn ---------------------------------------------


def _timeline(m: Metrics, data: dict[str, Any]) -> str:
    """The main process's tracks of the trace over a window around the first stalls."""
    events = data.get("traceEvents", [])
    main = next(
        (e["pid"] for e in events if e.get("ph") == "M" and e.get("name") == "process_sort_index"
         and e["args"].get("sort_index") == 0),
        None,
    )  # fmt: skip
    xs = [e for e in events if e.get("ph") in ("X", "B", "E") and e.get("pid") == main]
    if not xs:
        return svg.message("timeline", "no steps recorded")
    lo, hi = _window(m, data, xs)
    lanes = [
        _lane("stalls, saves, evals", xs, trace.TID_PHASES, lo, hi, 1, skip_cat=("phase",)),
        _lane("steps · data wait", xs, trace.TID_STEPS, lo, hi, 3),
        _lane("Python stack (py-spy)", xs, trace.TID_STACKS, lo, hi, TIMELINE_DEPTH),
    ]
    if any(e.get("tid") == trace.TID_DEVICE for e in xs):
        lanes.append(_lane("GPU (device clock)", xs, trace.TID_DEVICE, lo, hi, 1))
    return svg.timeline("timeline", lanes, lo / 1e6, hi / 1e6, "seconds since launch")


def _window(m: Metrics, data: dict[str, Any], drawn: list[dict[str, Any]]) -> tuple[float, float]:
    """µs range: the first two stalls with some context, else the first second of steady steps,
    else all that is ``drawn`` (a job too short for steps may have stack samples only: their
    begin and end marks, which have no duration)."""
    origin = _origin(data)
    stalls = m.activity.stalls
    if len(stalls) >= 2:
        a, b = stalls[0].t0, stalls[1].t1
        pad = 0.1 * (b - a)
        lo, hi = a - pad, b + pad
    elif stalls:
        lo, hi = stalls[0].t0 - 0.5, stalls[0].t1 + 0.5
    elif m.activity.window is not None:
        lo = m.activity.window[0]
        hi = min(m.activity.window[1], lo + 1.0)
    else:
        start = min(e["ts"] for e in drawn)
        end = max(e["ts"] + e.get("dur", 0) for e in drawn)
        return start, max(end, start + 1)
    return ((lo - origin) * 1e6, (hi - origin) * 1e6)


def _lane(
    name: str,
    events: list[dict[str, Any]],
    tid: int,
    lo: float,
    hi: float,
    max_depth: int,
    skip_cat: tuple[str, ...] = (),
) -> svg.Lane:
    """A track's spans inside [lo, hi] µs with their nesting depth, from its complete events
    and its begin/end pairs (the events are in the trace's order: sorted, parents first)."""
    lane = svg.Lane(name)
    open_x: list[int] = []  # ends of the complete events that contain the current one
    open_b: list[dict[str, Any]] = []  # begun, not yet ended

    def add(e: dict[str, Any], start: int, end: int, depth: int) -> None:
        if depth < max_depth and end >= lo and start <= hi:
            lane.spans.append((start / 1e6, end / 1e6, str(e["name"]), _span_class(e), depth))
            lane.depth = max(lane.depth, depth + 1)

    for e in events:
        if e.get("tid") != tid or e.get("cat") in skip_cat:
            continue
        if e["ph"] == "B":
            open_b.append(e)
        elif e["ph"] == "E" and open_b:
            begun = open_b.pop()
            add(begun, begun["ts"], e["ts"], len(open_b))
        elif e["ph"] == "X":
            start, end = e["ts"], e["ts"] + e["dur"]
            while open_x and open_x[-1] <= start:
                open_x.pop()
            add(e, start, end, len(open_x))
            open_x.append(end)
    return lane


def _span_class(e: dict[str, Any]) -> str:
    cat = e.get("cat")
    if cat == "stall":
        return f"cause-{e.get('args', {}).get('cause', 'cpu')}"
    if cat == "save":
        return "cause-checkpoint"
    if cat == "eval":
        return "cause-eval"
    if cat == "data":
        return "k-data_wait" if e["name"] == "data wait" else "k-fetch"
    if cat == "stack":
        return f"f{zlib.crc32(str(e['name']).encode()) % 6}"
    if cat == "device":
        return "s3"
    return "k-step"


STYLE = """
:root { --bg: #ffffff; --fg: #1f2328; --muted: #656d76; --grid: #d8dee4; --panel: #f6f8fa;
  --s0: #0969da; --s1: #8c959f; --s2: #bf8700; --s3: #1a7f37; --s4: #8250df; --s5: #cf222e;
  --cpu: #cf222e; --blocked: #8250df; --compile: #bc4c00; --data: #bf8700; --eval: #1a7f37;
  --save: #0550ae; --warn: #9a6700; --err: #cf222e; --info: #0969da; --ok: #1a7f37; }
@media (prefers-color-scheme: dark) {
  :root { --bg: #0d1117; --fg: #e6edf3; --muted: #8d96a0; --grid: #30363d; --panel: #161b22;
    --s0: #4493f8; --s1: #6e7681; --s2: #d29922; --s3: #3fb950; --s4: #ab7df8; --s5: #f85149;
    --cpu: #f85149; --blocked: #ab7df8; --compile: #db6d28; --data: #d29922; --eval: #3fb950;
    --save: #79c0ff; --warn: #d29922; --err: #f85149; --info: #4493f8; --ok: #3fb950; }
}
html { background: var(--bg); color: var(--fg); }
body { font: 14px/1.45 system-ui, sans-serif; max-width: 1040px; margin: 1.5em auto; padding: 0 1em; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.6em; }
pre { background: var(--panel); padding: .6em .8em; overflow-x: auto; font-size: 12.5px; }
code, pre { font-family: ui-monospace, monospace; }
.muted { color: var(--muted); fill: var(--muted); }
.sev.error { color: var(--err); } .sev.warning { color: var(--warn); } .sev.info { color: var(--info); }
.ok { color: var(--ok); } .warning { color: var(--warn); }
.finding { margin-bottom: 1em; } .finding p { margin: .2em 0; }
.where code { color: var(--s4); }
ul.evidence { list-style: "• "; } ul.fix { list-style: "→ "; color: var(--ok); }
figure { margin: 1.2em 0; break-inside: avoid; page-break-inside: avoid; }
figcaption { font-weight: 600; margin-bottom: .3em; }
svg.chart { max-width: 100%; height: auto; display: block; }
svg text { fill: var(--fg); font: 11px system-ui, sans-serif; }
svg text.small { font-size: 10px; }
svg .plot { fill: none; stroke: var(--grid); }
svg .grid { stroke: var(--grid); stroke-width: 1; }
svg .ref { stroke: var(--muted); stroke-dasharray: 4 3; }
svg .line { fill: none; stroke-width: 1.6; }
svg .dashed { stroke-dasharray: 6 4; stroke-width: 2; }
svg text.on-bar { fill: #ffffff; } svg text.on-light { fill: #1f2328; }
.s0 { stroke: var(--s0); fill: var(--s0); } .s1 { stroke: var(--s1); fill: var(--s1); }
.s2 { stroke: var(--s2); fill: var(--s2); } .s3 { stroke: var(--s3); fill: var(--s3); }
.s4 { stroke: var(--s4); fill: var(--s4); } .s5 { stroke: var(--s5); fill: var(--s5); }
polyline.line { fill: none; }
.cause-cpu { fill: var(--cpu); stroke: var(--cpu); } .cause-blocked { fill: var(--blocked); stroke: var(--blocked); }
.cause-compile { fill: var(--compile); stroke: var(--compile); } .cause-data { fill: var(--data); stroke: var(--data); }
.cause-eval { fill: var(--eval); stroke: var(--eval); } .cause-checkpoint { fill: var(--save); stroke: var(--save); }
.cause-sync { fill: var(--s4); stroke: var(--s4); }
.cause-wait { fill: var(--blocked); stroke: var(--blocked); }
.k-sampler, .k-worker_start, .k-fetch, .k-collate, .k-pin, .k-transfer, .k-data_wait { fill: var(--data); }
.k-fetch { opacity: .85; } .k-collate { opacity: .7; } .k-pin { opacity: .55; } .k-transfer { opacity: .6; } .k-sampler { opacity: .45; }
.k-worker_start { opacity: .35; }
.k-save { fill: var(--save); } .k-eval { fill: var(--eval); } .k-stall_compute { fill: var(--cpu); }
.k-stall_blocked { fill: var(--blocked); } .k-compile { fill: var(--compile); }
.k-stall_wait { fill: var(--blocked); opacity: .6; }
.k-forward { fill: var(--s0); } .k-backward { fill: var(--s0); opacity: .75; }
.k-optimizer { fill: var(--s0); opacity: .55; } .k-anomaly { fill: var(--s4); opacity: .5; }
.k-sync { fill: var(--s4); }
.k-logging { fill: var(--s4); opacity: .7; } .k-loop { fill: var(--s1); } .k-idle { fill: var(--s1); opacity: .6; }
.k-step { fill: var(--s0); opacity: .6; } .k-unattributed { fill: var(--grid); }
.f0 { fill: #8fb8ed; } .f1 { fill: #f0b27a; } .f2 { fill: #a3d9a5; } .f3 { fill: #d7a8e8; }
.f4 { fill: #f2d479; } .f5 { fill: #b8c4ce; }
footer { margin-top: 2em; color: var(--muted); font-size: 12px; }
@media print {
  :root { --bg: #ffffff; --fg: #000000; --panel: #ffffff; --grid: #cccccc; --muted: #444444; }
  body { max-width: none; margin: 0; font-size: 11pt; }
  pre { white-space: pre-wrap; border: 1px solid #cccccc; font-size: 9pt; }
  details { display: block; } details > summary { list-style: none; }
}
"""
