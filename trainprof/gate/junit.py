"""JUnit XML: one testcase per gate, in the common format GitHub, GitLab and Jenkins read.

A gate that failed or could not judge is a ``<failure>`` (its ``type`` says which), with the
one-line message as the attribute and the details (each failing finding with its evidence,
where and fix) as the text: CI systems show the attribute in lists and the text when opened.
"""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any

from trainprof.gate.gates import GateResult
from trainprof.render.text import unbyte

SUITE = "trainprof ci"


def junit_xml(
    gates: Sequence[GateResult], report: dict[str, Any], command: str, wall_s: float | None
) -> str:
    failures = sum(not g.passed for g in gates)
    seconds = f"{wall_s or 0.0:.3f}"
    root = ET.Element(
        "testsuites", name=SUITE, tests=str(len(gates)), failures=str(failures), errors="0"
    )
    root.set("time", seconds)
    suite = ET.SubElement(
        root,
        "testsuite",
        name=f"{SUITE}: {command}",
        tests=str(len(gates)),
        failures=str(failures),
        errors="0",
        skipped="0",
        time=seconds,
        timestamp=time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()),
    )
    props = ET.SubElement(suite, "properties")
    run = report.get("run") or {}
    for key, value in (
        ("command", command),
        ("exit_code", run.get("exit_code")),
        ("run_dir", run.get("run_dir")),
    ):
        ET.SubElement(props, "property", name=key, value=_clean(value))
    for g in gates:
        case = ET.SubElement(suite, "testcase", classname="trainprof.ci", name=g.name)
        # The job's wall time is the job gate's; the others judge the finished report.
        case.set("time", seconds if g.name == "job" else "0")
        if not g.passed:
            failure = ET.SubElement(
                case,
                "failure",
                message=_clean(g.message),
                type=g.status.replace(" ", "-"),
            )
            failure.text = _clean(_failure_text(g))
        else:
            out = ET.SubElement(case, "system-out")
            out.text = _clean("\n".join([g.message, *g.details]))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"


def _failure_text(g: GateResult) -> str:
    lines = [g.message, f"measured: {g.measured}; wanted: {g.limit}"]
    for f in g.findings:
        lines += ["", f"[{f.get('severity')}] {f.get('id')}: {f.get('title')}"]
        if f.get("where"):
            lines.append(f"where: {f['where']}")
        lines += [f"  - {e}" for e in f.get("evidence") or []]
        lines += [f"  fix: {x}" for x in f.get("fix") or []]
    if not g.findings:
        lines += list(g.details)
    return "\n".join(lines)


def _clean(value: object) -> str:
    """XML 1.0 cannot hold most control characters: the job's messages can."""
    text = "" if value is None else unbyte(value)
    return "".join(
        c if c in "\t\n\r" or (ord(c) >= 0x20 and c not in "\ufffe\uffff") else f"\\x{ord(c):02x}"
        for c in text
    )
