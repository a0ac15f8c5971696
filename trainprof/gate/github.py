"""GitHub Actions: workflow-command annotations and the job summary.

With ``GITHUB_ACTIONS=true`` each finding that fails the build becomes an ``::error`` at the
user's ``file:line`` (the line shows up in the pull request's diff), findings below
``--fail-on`` become ``::warning``, and each other failed gate an ``::error`` without a file.
With ``GITHUB_STEP_SUMMARY`` set, a Markdown summary is appended to that file.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainprof.gate.gates import SEVERITY_RANK, GateResult, Verdict
from trainprof.render.text import clean, unbyte

_WHERE = re.compile(r"^(?P<file>.+?):(?P<line>\d+)(?:\s+\(.*\))?$")
STATUS_ICON = {"pass": "✅", "fail": "❌", "not measured": "⚠️", "not comparable": "⚠️"}


def on_github() -> bool:
    return os.environ.get("GITHUB_ACTIONS") == "true"


# Control characters other than CR and LF (those are %-escaped), shown as escapes: an ESC
# sequence in a job's message would otherwise colour or hide GitHub's log.
_CONTROL = re.compile("[\x00-\x09\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def _escape_data(text: str) -> str:
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", unbyte(text))
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def location(where: str | None, job_cwd: str | None) -> tuple[str, int] | None:
    """``(file, line)`` of a finding's ``where``, relative to ``GITHUB_WORKSPACE`` (else the
    job's directory) when the file lies inside it: GitHub places annotations by repository
    path."""
    m = _WHERE.match(where or "")
    if not m:
        return None
    path = Path(m.group("file"))
    if not path.is_absolute() and job_cwd:
        path = Path(job_cwd) / path
    base = os.environ.get("GITHUB_WORKSPACE") or job_cwd
    if base and path.is_absolute():
        try:
            return str(path.resolve().relative_to(Path(base).resolve())), int(m.group("line"))
        except (ValueError, OSError):
            pass
    return m.group("file"), int(m.group("line"))


def annotation_lines(
    verdict: Verdict, report: dict[str, Any], fail_on: str, job_cwd: str | None
) -> list[str]:
    """The workflow-command lines, one per failing gate or finding."""
    lines = []
    failing_ids = set()
    for g in verdict.gates:
        if g.passed:
            continue
        if g.name == "findings":
            for f in g.findings:
                failing_ids.add(f.get("id"))
                lines.append(_finding_line("error", f, job_cwd))
            continue
        title = f"trainprof ci: {g.name} {g.status}"
        lines.append(f"::error title={_escape_property(title)}::{_escape_data(g.message)}")
    for f in report.get("findings") or []:
        below = SEVERITY_RANK.get(f.get("severity", ""), 0) < SEVERITY_RANK[fail_on]
        if f.get("id") not in failing_ids and f.get("severity") != "info" and below:
            lines.append(_finding_line("warning", f, job_cwd))
    return lines


def _finding_line(level: str, f: dict[str, Any], job_cwd: str | None) -> str:
    title = f"trainprof {f.get('id')}: {f.get('title')}"
    props = [f"title={_escape_property(title)}"]
    at = location(f.get("where"), job_cwd)
    if at is not None:
        props = [f"file={_escape_property(at[0])}", f"line={at[1]}", *props]
    fix = f.get("fix") or []
    body = "\n".join([*(f.get("evidence") or [])[:3], *(f"fix: {x}" for x in fix[:2])])
    return f"::{level} {','.join(props)}::{_escape_data(body or str(f.get('title')))}"


def step_summary(
    verdict: Verdict,
    gates: Sequence[GateResult],
    report: dict[str, Any],
    command: str,
    job_cwd: str | None = None,
) -> str:
    """Markdown for ``$GITHUB_STEP_SUMMARY``."""
    code = verdict.exit_code
    head = {0: "✅ all gates passed", 1: "❌ a gate failed", 3: "❌ the job crashed or hung"}
    summary = report.get("summary") or {}
    facts = [f"`{_code(command)}`"]
    if summary.get("samples_per_s") is not None:
        facts.append(f"{summary['samples_per_s']:.1f} samples/s")
    if summary.get("steps"):
        facts.append(f"{summary['steps']} steps")
    out = [
        f"### trainprof ci: {head.get(code, '')} (exit {code})",
        "",
        " · ".join(facts),
        "",
        "| gate | status | measured | wanted | why |",
        "| --- | --- | --- | --- | --- |",
    ]
    for g in gates:
        out.append(
            f"| {g.name} | {STATUS_ICON[g.status]} {g.status} | {_md(g.measured)} | "
            f"{_md(g.limit)} | {_md(g.message)} |"
        )
    findings = report.get("findings") or []
    if findings:
        out += ["", "**Findings**", ""]
        for f in findings:
            at = location(f.get("where"), job_cwd)
            where = f" at `{_code(f'{at[0]}:{at[1]}')}`" if at else ""
            out.append(f"- **{f.get('severity')}** `{f.get('id')}`: {_md(f.get('title'))}{where}")
    return "\n".join(out) + "\n\n"


def _code(text: object) -> str:
    """Text for a Markdown code span in a table: one line, controls and bytes escaped."""
    return clean(str(text).replace("\n", " ")).replace("|", "\\|").replace("`", "'")


def _md(text: object) -> str:
    """Text for Markdown outside code: as ``_code``, and no HTML (``<`` ``>`` ``&`` as entities)."""
    return html.escape(_code(text), quote=False)
