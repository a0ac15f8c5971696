"""The gate table on the console: one row per gate, its status, what was measured, what the
gate wanted and why; then one line with the exit code. Renders the verdicts only."""

from __future__ import annotations

from rich import box
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from trainprof.gate.gates import EXIT_GATE, EXIT_JOB, EXIT_PASS, Verdict
from trainprof.render.console import relative_to
from trainprof.render.text import clean

STATUS_STYLE = {
    "pass": "green",
    "fail": "bold red",
    "not measured": "bold yellow",
    "not comparable": "bold yellow",
}
EXIT_LINE = {
    EXIT_PASS: "every gate passed",
    EXIT_GATE: "a gate failed",
    EXIT_JOB: "the job crashed or hung",
}


def render_gates(
    console: Console, verdict: Verdict, throughput: str | None = None, cwd: str | None = None
) -> None:
    """The table; ``throughput`` (the windows' median and spread) above the exit line. Paths
    under ``cwd`` (the job's directory) are shown relative, as the report shows them."""
    rel = relative_to(cwd)
    table = Table(
        title="trainprof ci gates", box=box.SIMPLE_HEAD, pad_edge=False, title_justify="left"
    )
    table.add_column("gate", style="bold", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("measured · wanted · why")
    for g in verdict.gates:
        head = Text(clean(g.measured), style="bold")
        head.append(clean(f"  wanted {g.limit}"), style="")
        why: list[RenderableType] = [head, Text(clean(g.message), overflow="fold")]
        why += [Padding(Text(rel(clean(d)), style="dim"), (0, 0, 0, 2)) for d in g.details]
        table.add_row(Text(g.name), Text(g.status, style=STATUS_STYLE[g.status]), Group(*why))
    console.print(table)
    if throughput:
        console.print(Text(clean(f"throughput: {throughput}")))
    code = verdict.exit_code
    failed = sum(not g.passed for g in verdict.gates)
    count = f"{failed} of {len(verdict.gates)} gates did not pass" if failed else ""
    line = Text(f"trainprof ci: exit {code}: {EXIT_LINE[code]}", style="bold")
    if count:
        line.append(f" ({count})")
    console.print(line)
