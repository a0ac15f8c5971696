"""`trainprof rules` and the rule pages (docs/rules/), both generated from the rule registry: the
pages cannot drift from the registry, `trainprof rules ID` says what the page says, every rule
documents itself, and the command reads well (every id listed, a clear line for an unknown id)."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from trainprof.analysis.rules import all_rules
from trainprof.analysis.rules.registry import REGISTRY, Rule
from trainprof.render import rules_reference as ref
from trainprof.render.rule_examples import EXAMPLES

ROOT = Path(__file__).resolve().parents[2]
RULES_DIR = ROOT / "docs" / "rules"


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


def test_rule_pages_are_the_generated_ones() -> None:
    wanted = ref.pages(all_rules())
    on_disk = {p.name: p.read_text(encoding="utf-8") for p in RULES_DIR.glob("*.md")}
    stale = sorted(n for n in wanted.keys() | on_disk.keys() if wanted.get(n) != on_disk.get(n))
    assert not stale, f"docs/rules/ is out of date ({', '.join(stale)}): run `make docs`"


def _words(text: str) -> str:
    """Text compared as words: no Markdown marks, no line breaks or padding of the terminal."""
    return " ".join(re.sub(r"[`*\\]", "", text).split())


def _shown(r: Rule) -> str:
    """What `trainprof rules ID` prints at 200 columns (its renderer, in this process)."""
    console = Console(file=io.StringIO(), width=200, no_color=True, highlight=False)
    ref.print_rule(console, r)
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_rules_id_prints_its_renderer_output() -> None:
    out = trainprof("rules", "host-oom", columns=200)
    assert out.returncode == 0, out.stderr
    assert _words(out.stdout) == _words(_shown(next(r for r in all_rules() if r.id == "host-oom")))


@pytest.mark.parametrize("r", all_rules(), ids=lambda r: r.id)
def test_rules_id_prints_what_its_page_says(r: Rule) -> None:
    page = _words((RULES_DIR / f"{r.id}.md").read_text(encoding="utf-8"))
    shown = _words(_shown(r))
    pieces = [ref.summary_paragraph(r), *ref.details(r), ref.NEEDS_HEADING, ref.CLAIMS_HEADING]
    pieces += [t.doc for t in r.thresholds] + [ref.SIGNAL_MEANING[n] for n in r.needs]
    pieces += [line for h in ref.BLOCKS for line in r.block(h).splitlines() if line.strip()]
    pieces += [*ref.zoo_lines(r), ref.example_intro(r)]
    if r.id in EXAMPLES:
        pieces += EXAMPLES[r.id]["text"].splitlines()
    for piece in pieces:
        assert _words(piece) in page, f"not on the page: {piece!r}"
        assert _words(piece) in shown, f"not in `trainprof rules {r.id}`: {piece!r}"


def test_markdown_for_one_rule_is_its_page() -> None:
    out = trainprof("rules", "input-bound", "--markdown")
    assert out.returncode == 0, out.stderr
    assert out.stdout == (RULES_DIR / "input-bound.md").read_text(encoding="utf-8")


def test_examples_are_real_findings_of_their_rule() -> None:
    """Each example is a findings panel holding one finding, of its own rule, from the zoo
    script it names, with no path of the machine that captured it."""
    from trainprof.examples.zoo import ZOO

    for rule_id, ex in EXAMPLES.items():
        lines = ex["text"].splitlines()
        assert lines[0].startswith("╭─ findings") and lines[-1].startswith("╰"), rule_id
        assert re.match(r"│ 1?\d\. \[", lines[1]), rule_id
        assert f"({rule_id}" in _words(ex["text"]), rule_id
        assert ZOO[ex["case"]].expect == rule_id and ex["case"] in ex["command"], rule_id
        assert "/tmp/" not in ex["text"] and "/home/" not in ex["text"], rule_id
        assert len({len(line) for line in lines}) == 1, f"{rule_id}: the panel's border is broken"


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
    out = trainprof("rules", "--json", "-")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [r["id"] for r in data["rules"]] == [r.id for r in all_rules()]
    bound = next(r for r in data["rules"] if r["id"] == "input-bound")
    assert bound["thresholds"][0]["text"] == "20%"
    assert bound["anti_pattern"] and bound["best_practice"]


def test_json_takes_a_path_as_every_command_does(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "rules.json"
    out = trainprof("rules", "cpu-stall", "--json", str(path))
    assert out.returncode == 0, out.stderr
    assert out.stdout == "" and str(path) in out.stderr
    assert [r["id"] for r in json.loads(path.read_text())["rules"]] == ["cpu-stall"]
    assert path.stat().st_mode & 0o777 == 0o600


def test_json_before_a_rule_id_still_prints_that_rule() -> None:
    """`rules --json cpu-stall` (written when --json was a flag) prints the rule, not a file."""
    out = trainprof("rules", "--json", "cpu-stall")
    assert out.returncode == 0, out.stderr
    assert [r["id"] for r in json.loads(out.stdout)["rules"]] == ["cpu-stall"]
    assert not (ROOT / "cpu-stall").exists()


def test_markdown_and_json_together_is_refused() -> None:
    out = trainprof("rules", "--markdown", "--json", "-")
    assert out.returncode == 2
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_every_signal_is_explained_in_plain_words() -> None:
    from trainprof.analysis.rules.registry import SIGNALS
    from trainprof.render.rules_reference import SIGNAL_MEANING

    assert set(SIGNAL_MEANING) == set(SIGNALS)


def test_the_measured_fixes_are_benchmarks_rows_on_their_rules_pages() -> None:
    """BENCHMARKS.md's table of what tune measured, copied as written; each row on the page of
    every rule whose zoo scripts it names, and a page with none says nothing was measured."""
    from trainprof.render.measured_fixes import MEASURED

    text = (ROOT / "docs" / "BENCHMARKS.md").read_text(encoding="utf-8")
    assert MEASURED == tuple(ref.measured_rows(text)), "run `make docs`: BENCHMARKS.md moved"
    assert MEASURED, "the table was not found"
    starved = ref.rule_page(REGISTRY["cpu-starved"])
    assert all(row in starved for row in MEASURED if "`oversubscribed.py`" in row)
    assert "No fix of this rule has been measured" in ref.rule_page(REGISTRY["eval-stall"])
