"""The HTML report's plots: step time, the ledger, data wait, utilization, memory, the timeline."""

from __future__ import annotations

import math
from html import escape
from typing import Any

from trainprof.analysis import ledger
from trainprof.analysis.findings import Verdict
from trainprof.analysis.memory import MIN_R2
from trainprof.analysis.metrics import Metrics
from trainprof.render import console as console_render
from trainprof.render import svg, trace
from trainprof.render.html_timeline import timeline
from trainprof.render.text import clean
from trainprof.render.trace_phases import CAUSE
from trainprof.store.session import Session

MIB = 1024 * 1024
STEP_POINTS = 1500  # step-time chart: beyond, per-bin means (and maxima) of steps
WAIT_BINS = 120
CAUSES = ("cpu", "blocked", "wait", "compile", "sync", "data", "eval", "checkpoint")


def charts(
    session: Session, m: Metrics, verdict: Verdict, data: dict[str, Any], origin: float
) -> list[tuple[str, str]]:
    """Each plot of the page, after its caption."""
    return [
        ("Step time over steps, stalls coloured by cause", _step_chart(session, m)),
        ("Where the steady time went (the time ledger)", _ledger_chart(m, verdict)),
        ("Data-wait share over time", _wait_chart(session, m, origin)),
        ("CPU and GPU utilization over time", _util_chart(session, m, origin)),
        ("Memory per process, with the growth trend", _memory_chart(session, m, origin)),
        ("Timeline (the trace, drawn): stalls, steps and Python stacks", timeline(m, data)),
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
            series.append(svg.Series(f"stall: {CAUSE[cause]}", dots, f"cause-{cause}", "dots"))
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
