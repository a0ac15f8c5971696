"""`trainprof rules` and the README's rules table, both generated from the rule registry: the
README cannot drift from the registry, every rule documents itself, and the command reads well
for a user (every id listed, one rule in full, a clear line for an unknown id)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from trainprof.analysis.rules import all_rules
from trainprof.analysis.rules.registry import Rule

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BEGIN, END = "<!-- rules:begin -->", "<!-- rules:end -->"


def trainprof(*args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    env.update(COLUMNS=str(columns), NO_COLOR="1")
    return subprocess.run(
        [sys.executable, "-m", "trainprof", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def readme_block() -> str:
    text = README.read_text(encoding="utf-8")
    assert text.count(BEGIN) == 1 and text.count(END) == 1, f"README needs one {BEGIN} … {END}"
    return text.split(BEGIN, 1)[1].split(END, 1)[0]


def test_readme_rules_table_is_the_generated_one() -> None:
    out = trainprof("rules", "--markdown")
    assert out.returncode == 0, out.stderr
    assert readme_block().strip() == out.stdout.strip(), (
        "README.md's rules table is out of date: replace what is between "
        f"{BEGIN} and {END} with the output of `trainprof rules --markdown`"
    )


@pytest.mark.parametrize("r", all_rules(), ids=lambda r: r.id)
def test_every_rule_documents_itself(r: Rule) -> None:
    assert r.summary.strip(), f"{r.id}: its docstring has no summary"
    for heading in ("Anti-pattern", "Best practice"):
        assert r.block(heading).strip(), f"{r.id}: empty {heading}:: block in its docstring"


@pytest.mark.parametrize("columns", [80, 160])
def test_rules_lists_every_id(columns: int) -> None:
    out = trainprof("rules", columns=columns)
    assert out.returncode == 0, out.stderr
    listed = set(re.findall(r"^([a-z][a-z0-9-]+)\s", out.stdout, re.MULTILINE))
    missing = {r.id for r in all_rules()} - listed
    assert not missing, f"not listed at {columns} columns: {sorted(missing)}"
    assert max(len(line) for line in out.stdout.splitlines()) <= columns


def test_one_rule_shows_its_thresholds_and_both_blocks() -> None:
    out = trainprof("rules", "cpu-stall", columns=200)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    rule = next(r for r in all_rules() if r.id == "cpu-stall")
    for t in rule.thresholds:
        assert re.search(rf"{t.name}\s+{re.escape(str(t))}\s+{re.escape(t.doc)}", text), t.name
    for heading in ("Anti-pattern", "Best practice"):
        assert heading in text
        for line in rule.block(heading).splitlines():
            assert line.strip() in text, f"{heading} line missing: {line!r}"
    assert "a steady state of optimizer steps" in text  # what the signal it needs means
    assert "stall_compute" in text and "stalls: CPU work in the loop" in text  # its claim


def test_unknown_id_is_one_line_and_exit_2() -> None:
    out = trainprof("rules", "nope")
    assert out.returncode == 2
    assert out.stdout == ""
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "nope" in lines[0], out.stderr


def test_unknown_id_names_close_matches() -> None:
    out = trainprof("rules", "cpu-stal")
    assert out.returncode == 2
    assert "cpu-stall" in out.stderr


def test_json_is_the_registry() -> None:
    out = trainprof("rules", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [r["id"] for r in data["rules"]] == [r.id for r in all_rules()]
    bound = next(r for r in data["rules"] if r["id"] == "input-bound")
    assert bound["thresholds"][0]["text"] == "20%"
    assert bound["anti_pattern"] and bound["best_practice"]


def test_markdown_for_one_rule_is_its_row() -> None:
    out = trainprof("rules", "input-bound", "--markdown")
    assert out.returncode == 0, out.stderr
    rows = [line for line in out.stdout.splitlines() if line.startswith("| `")]
    assert len(rows) == 1 and "`input-bound`" in rows[0] and "20%" in rows[0]


def test_markdown_and_json_together_is_refused() -> None:
    out = trainprof("rules", "--markdown", "--json")
    assert out.returncode == 2
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_every_signal_is_explained_in_plain_words() -> None:
    from trainprof.analysis.rules.registry import SIGNALS
    from trainprof.render.rules_reference import SIGNAL_MEANING

    assert set(SIGNAL_MEANING) == set(SIGNALS)
