"""What `trainprof ci` writes for CI systems: JUnit XML read back with junitparser, GitHub
Actions annotations (escaped, at the user's file:line) and the step summary."""

from __future__ import annotations

from pathlib import Path

import pytest
from junitparser import Failure, JUnitXml
from test_ci_gates import finding, report

from trainprof.gate import github
from trainprof.gate.gates import GateOptions, evaluate
from trainprof.gate.junit import junit_xml


def crashed() -> dict:
    r = report(steps=3, samples_per_s=None, steps_per_s=None, step_time_s=None)
    r["run"].update(exit_code=1, stopped_by=None)
    r["findings"] = [
        finding("ragged-batch", "error", "data/videos.py:41 (VideoClips.__getitem__)"),
        finding("input-bound", "warning", "train.py:7 (main)"),
    ]
    return r


def test_junit_has_one_testcase_per_gate_and_reads_back(tmp_path: Path) -> None:
    r = crashed()
    r["findings"][0]["evidence"] = ["stack expects each tensor to be equal size\x1b[0m"]
    v = evaluate(r, [], GateOptions(max_data_wait=0.2, min_gpu_util=50.0))
    path = tmp_path / "junit.xml"
    path.write_text(junit_xml(v.gates, r, "python train.py", 4.2))
    xml = JUnitXml.fromfile(str(path))
    suites = list(xml)
    assert len(suites) == 1
    cases = {c.name: c for c in suites[0]}
    assert list(cases) == ["job", "findings", "max-data-wait", "min-gpu-util"]
    assert suites[0].tests == 4 and suites[0].failures == 3
    fails = {
        n: next((x for x in c.result if isinstance(x, Failure)), None) for n, c in cases.items()
    }
    assert fails["max-data-wait"] is None  # 5% <= 20%
    assert fails["job"] is not None and "exit code 1" in fails["job"].message
    findings = fails["findings"]
    assert findings is not None and "ragged-batch" in findings.message
    assert "where: data/videos.py:41" in findings.text and "\\x1b" in findings.text
    gpu = fails["min-gpu-util"]
    assert gpu is not None and gpu.type == "not-measured"


def test_annotations_point_at_the_users_line_and_escape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp_path))
    job_dir = tmp_path / "sub"
    r = crashed()
    r["findings"][0]["evidence"] = ["100% of steps, a: b, c\nnext"]
    v = evaluate(r, [], GateOptions())
    lines = github.annotation_lines(v, r, "error", str(job_dir))
    ragged = next(x for x in lines if "ragged-batch" in x)
    assert ragged.startswith(
        "::error file=sub/data/videos.py,line=41,title=trainprof ragged-batch%3A"
    )
    assert "100%25 of steps, a: b, c%0Anext" in ragged  # message data keeps ':' and ','
    # A warning below --fail-on is a warning annotation; the failed job gate an error.
    assert any(x.startswith("::warning file=sub/train.py,line=7,") for x in lines)
    assert any(x.startswith("::error title=trainprof ci%3A job fail::") for x in lines)


def test_location_outside_the_workspace_is_kept_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    assert github.location("train.py:46 (main)", None) == ("train.py", 46)
    assert github.location("…/pkg/train.py:46", None) == ("…/pkg/train.py", 46)
    assert github.location(None, None) is None
    assert github.location("no line here", None) is None


def test_step_summary_is_a_markdown_table() -> None:
    r = crashed()
    v = evaluate(r, [], GateOptions())
    md = github.step_summary(v, v.gates, r, "python train.py --name a|b")
    assert md.startswith("### trainprof ci: ❌ the job crashed or hung (exit 3)")
    assert "| gate | status | measured | wanted | why |" in md
    assert "| job | ❌ fail | exit 1 |" in md
    assert "`python train.py --name a\\|b`" in md
    assert "- **error** `ragged-batch`" in md
