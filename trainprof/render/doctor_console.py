"""`trainprof doctor` for humans: one rich table, grouped by area, worst news in colour.

Renders only what the report holds (no judging here); every string goes in as rich ``Text``
so brackets in paths or versions are never read as markup.
"""

from __future__ import annotations

from rich import box
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from trainprof.doctor.registry import DoctorReport
from trainprof.render.text import clean

STATUS_STYLE = {"ok": ("ok", "green"), "warn": ("warn", "yellow"), "fail": ("FAIL", "bold red")}


def _cell(
    title: str, check_id: str | None, evidence: tuple[str, ...], fix: tuple[str, ...]
) -> Group:
    """Title and id (warn and fail rows only: an id beside "ok" reads as a problem), then
    indented evidence (dim) and fixes; wrapped lines keep the indent."""
    head = Text(clean(title), style="bold")
    if check_id is not None:
        head.append(f"  {check_id}", style="dim")
    lines: list[RenderableType] = [head]
    lines += [Padding(Text(clean(line), style="dim"), (0, 0, 0, 2)) for line in evidence]
    lines += [Padding(Text.assemble(("fix: ", "cyan"), clean(line)), (0, 0, 0, 2)) for line in fix]
    return Group(*lines)


def render_doctor(report: DoctorReport, console: Console, strict: bool = False) -> None:
    """The table, then one summary line that states the exit code and why."""
    console.print(Text("trainprof doctor: is this machine ready to train?", style="bold"))
    if report.env:
        console.print(
            Text(
                clean("environment: " + "  ".join(f"{k}={v}" for k, v in report.env.items())),
                style="dim",
            )
        )
    table = Table(box=box.SIMPLE_HEAD, show_lines=False, pad_edge=False, expand=False)
    table.add_column("area", style="bold", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("check")
    last_area = None
    for row in report.checks:
        if last_area is not None and row.area != last_area:
            table.add_section()
        label, style = STATUS_STYLE[row.status]
        f = row.finding
        table.add_row(
            Text(row.area if row.area != last_area else ""),
            Text(label, style=style),
            _cell(f.title, f.id if row.status != "ok" else None, f.evidence, f.fix),
        )
        last_area = row.area
    console.print(table)
    n = report.counts()
    code = report.exit_code(strict)
    why = (
        "a check failed"
        if n["fail"]
        else ("--strict and a check warned" if code else "nothing failed")
    )
    summary = Text(
        f"{n['ok']} ok, {n['warn']} warn, {n['fail']} fail in {report.elapsed_s:.1f} s: "
    )
    summary.append(f"exit {code} ({why})", style="bold red" if code else "bold green")
    console.print(summary)
