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
import sys
from html import escape
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from trainprof.analysis.findings import Finding, Verdict
from trainprof.analysis.metrics import Metrics
from trainprof.errors import TrainprofError
from trainprof.render import console as console_render
from trainprof.render import trace
from trainprof.render.html_charts import charts
from trainprof.render.html_style import STYLE
from trainprof.render.quiet_note import quiet_note
from trainprof.render.text import clean, literal, shell_join
from trainprof.render.trace import time_zero
from trainprof.store.rundir import check_user_file, current_dir, write_user_file
from trainprof.store.session import Session
from trainprof.version import __version__


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
        shown = console_render.relative_to(current_dir())(str(path.absolute()))
        hint = " (open it in Perfetto UI or chrome://tracing)" if option == "--trace" else ""
        lines.append(literal(f"{what}: {shown}{hint}", style="dim"))
    return lines


# ---- the page ------------------------------------------------------------------------------


def render(session: Session, m: Metrics, verdict: Verdict, trace_data: dict[str, Any]) -> str:
    meta = session.meta
    command = [str(a) for a in meta.get("command", [])]
    if command:
        command[0] = Path(command[0]).name
    title = f"trainprof report: {shell_join(command)}" if command else "trainprof report"
    origin = time_zero(trace_data)
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
    for heading, chart in charts(session, m, verdict, trace_data, origin):
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
        file=buf,
        width=100,
        color_system=None,
        highlight=False,
        markup=False,
        emoji=False,
        force_jupyter=False,  # in a notebook's kernel too: into buf, not shown in the notebook
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
        text, ok = quiet_note(meta, m, verdict.findings)
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
