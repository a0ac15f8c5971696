"""The README's captured output has the shape of today's: the same boxes, rows and findings in
the same order as a fresh run of the same command prints, numbers aside. An excerpt whose row
was dropped or renamed fails here, not in a reader's hands: `make docs` captures it again."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tools import docs  # noqa: E402

pytestmark = pytest.mark.slow

STALE = "README.md's {} excerpt is stale: run `make docs`"
# Another process's load adds this finding to any report: the only one the README's idle
# capture may lack or have that a run beside other work may not.
LOAD_FINDINGS = {"CPU-starved"}


def readme_block(name: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split(f"<!-- {name}:begin -->", 1)[1].split(f"<!-- {name}:end -->", 1)[0]
    return block.split("```", 1)[1].rsplit("```", 1)[0].strip("\n")


def run_output(folder: Path, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "trainprof", *args],
        cwd=folder,
        env=docs._env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
        check=False,
    )
    return proc.stdout


def report_shape(out: str) -> dict[str, list[str]]:
    """A report's boxes (their titles), the first box's row labels and the findings' titles,
    each in order."""
    lines = out.splitlines()
    titles = [m.group(1) for ln in lines if (m := re.match(r"^╭─ (.+?) ─", ln))]
    start = next(i for i, ln in enumerate(lines) if ln.startswith("╭─ trainprof report"))
    first = lines[start + 1]
    label_end = re.match(r"^│ +\S+", first).end()  # type: ignore[union-attr]
    rows = []
    for ln in lines[start + 1 :]:
        if ln.startswith("╰"):
            break
        if label := ln[1:label_end].strip():
            rows.append(label)
    findings = [
        m.group(1)
        for ln in lines
        if (m := re.match(r"^│ \d+\. \[\w+\] ([^:]+):", ln)) and m.group(1) not in LOAD_FINDINGS
    ]
    return {"boxes": titles, "rows": rows, "findings": findings}


def line_shape(line: str) -> str:
    """A line without its numbers, spacing or verdict words: what stays the same between runs."""
    line = re.sub(r"\d+(\.\d+)?", "#", line)
    line = re.sub(r"\b(ok|warn|fail|pass)\b", "<status>", line)
    line = re.sub(r"# (\w+?)s\b", r"# \1", line)  # "1 warning", "2 warnings"
    return " ".join(line.split())


def test_shape_is_read_the_same_from_each_report() -> None:
    """The comparison can fail: a dropped row, a renamed box, another finding."""
    block = readme_block("demo")
    shape = report_shape(block)
    assert shape["rows"][:2] == ["command", "python"] and "trainprof cost" in shape["rows"]
    assert shape["boxes"][0] == "trainprof report" and shape["findings"]
    dropped = "\n".join(ln for ln in block.splitlines() if "peak memory" not in ln)
    assert report_shape(dropped)["rows"] != shape["rows"]
    assert line_shape(" cpu      ok       2 usable CPUs") == line_shape(
        " cpu  warn  16 usable CPUs"
    )


def test_the_demo_report_has_todays_shape(tmp_path: Path) -> None:
    script = ROOT / "trainprof" / "examples" / "demo_train.py"
    shutil.copy(script, tmp_path)
    fresh = report_shape(run_output(tmp_path, "run", script.name))
    assert report_shape(readme_block("demo")) == fresh, STALE.format("demo")


def test_the_doctor_and_ci_excerpts_have_todays_shape(tmp_path: Path) -> None:
    shutil.copy(docs.ZOO / "input_bound.py", tmp_path)
    ci = run_output(
        tmp_path, "ci", "-q", "--steps", "40", "--max-data-wait", "0.2", "--fail-on", "warning",
        "input_bound.py",
    )  # fmt: skip
    for name, out in (("doctor", run_output(tmp_path, "doctor")), ("ci", ci)):
        fresh = [line_shape(ln) for ln in docs.pick(out, name).splitlines()]
        assert [line_shape(ln) for ln in readme_block(name).splitlines()] == fresh, STALE.format(
            name
        )
