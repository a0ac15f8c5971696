"""`trainprof compare` on the console: the two runs side by side (their load too), then the
verdict, the findings that changed and the settings that differ. Renders the comparison only."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from trainprof.compare.diff import Comparison, describe_spread, step_time, window_step_range
from trainprof.compare.settings import LABELS
from trainprof.render.text import clean, shell_join
from trainprof.units import fmt_bytes

TREND_STYLE = {
    "faster": "bold green",
    "slower": "bold red",
    "within noise": "bold",
    "not measured": "bold yellow",
}


def render_comparison(console: Console, c: Comparison) -> None:
    """The runs' names and commands, each on a line of its own (never broken inside a word: a
    narrow terminal wraps them, a copy still pastes whole), then the table, verdict, findings
    and settings."""
    a, b = c.a, c.b
    for letter, side in (("A", a), ("B", b)):
        console.print(Text(clean(f"{letter}  {side.label}"), style="bold"), soft_wrap=True)
        console.print(Text(clean(f"   {_command(side.report)}"), style="dim"), soft_wrap=True)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, title_justify="left")
    table.add_column("", style="bold", no_wrap=True)
    table.add_column("A", overflow="fold")  # a word wider than its column: folded, not cut
    table.add_column("B", overflow="fold")

    def row(name: str, va: str, vb: str) -> None:
        table.add_row(Text(name), Text(clean(va)), Text(clean(vb)))

    ra, rb = a.report, b.report
    row("samples/s", describe_spread(a.samples), describe_spread(b.samples))
    it_note = " (not comparable: see below)" if c.batch_note else ""
    row("it/s", describe_spread(a.steps) + it_note, describe_spread(b.steps) + it_note)
    row(
        "step time",
        _with(step_time(ra), window_step_range(a.windows)),
        _with(step_time(rb), window_step_range(b.windows)),
    )
    row("data wait", _share(ra, "data_wait_frac"), _share(rb, "data_wait_frac"))
    row("load", a.load.describe(), b.load.describe())
    row("peak memory", _rss(ra), _rss(rb))
    row("findings", _ids(a.finding_ids()), _ids(b.finding_ids()))
    console.print(table)

    verdict = Text("verdict: ", style="bold")
    if c.change is None:
        verdict.append("not measured", style=TREND_STYLE[c.trend])
    else:
        verdict.append(f"B is {c.trend}", style=TREND_STYLE[c.trend])
        verdict.append(f": {c.measure} {c.change:+.1%} ({c.why})")
    if c.change is None:
        verdict.append(f": {c.why}")
    console.print(verdict)
    if c.load_note:
        console.print(Text(clean(c.load_note), style="yellow"))
    if c.batch_note:
        console.print(Text(clean(c.batch_note)))
    console.print(
        Text(
            "findings: appeared "
            + (", ".join(c.appeared) or "none")
            + "; disappeared "
            + (", ".join(c.disappeared) or "none")
        )
    )
    if not (a.settings and b.settings):
        which = "A" if not a.settings else "B"
        console.print(
            Text(f"settings: {which}'s report records none (written by an older trainprof)")
        )
    elif c.settings:
        console.print(Text("settings that differ:", style="bold"))
        for key, va, vb in c.settings:
            console.print(Text(clean(f"  {LABELS[key]}: {_v(va)} → {_v(vb)}")))
    else:
        same = ", ".join(
            LABELS[k] for k in ("batch_size", "num_workers", "torch_threads", "precision", "device")
        )
        console.print(Text(f"settings: the same ({same}, torch version, ...)"))


def _command(report: dict[str, object]) -> str:
    run = report.get("run")
    cmd = run.get("command") if isinstance(run, dict) else None
    return shell_join(str(x) for x in cmd) if isinstance(cmd, list) else "not recorded"


def _with(text: str, extra: str | None) -> str:
    return f"{text} ({extra})" if extra else text


def _share(report: dict[str, object], key: str) -> str:
    summary = report.get("summary")
    v = summary.get(key) if isinstance(summary, dict) else None
    return f"{v:.0%}" if isinstance(v, (int, float)) else "not measured"


def _rss(report: dict[str, object]) -> str:
    summary = report.get("summary")
    v = summary.get("peak_rss_bytes") if isinstance(summary, dict) else None
    return fmt_bytes(v) if isinstance(v, (int, float)) else "not measured"


def _ids(ids: list[str]) -> str:
    return ", ".join(ids) or "none"


def _v(value: object) -> str:
    return "not recorded" if value is None else str(value)
