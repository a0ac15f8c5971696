"""The user docs stay true: every `trainprof ...` command line shown in README.md, docs/guide/,
docs/rules/ and CONTRIBUTING.md parses with trainprof's own parser, the README stays short and holds the demo's real report,
and no doc tells a user to install trainprof from the package index."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer
from typer._click.exceptions import ClickException  # typer's own click, that it parses with
from typer.main import get_command

from trainprof.cli import app

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
GUIDES = sorted((ROOT / "docs" / "guide").glob("*.md"))
DOCS = [README, *GUIDES]
DEMO_BEGIN, DEMO_END = "<!-- demo:begin -->", "<!-- demo:end -->"
CLI = get_command(app)
COMMANDS = set(CLI.commands)  # type: ignore[attr-defined]
SHELL_ENDS = {"|", "||", "&&", ";", "&", ">", ">>", "2>&1", "2>/dev/null"}


def _command_lines(text: str) -> list[str]:
    """`trainprof ...` lines of the fenced blocks (continuations joined) and inline code spans
    that start with `trainprof COMMAND` (report output such as `trainprof ci gates` included:
    it must parse too)."""
    found: list[str] = []
    fenced = False
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif fenced:
            while line.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line.rstrip()[:-1] + " " + lines[i].strip()
            found.append(line.strip().removeprefix("$ "))
        else:  # a span that names a command (`trainprof run`, `trainprof attach PID`) is no line
            spans = re.findall(r"`(trainprof [^`]+)`", line)
            found += [c for c in spans if any(not w.isupper() for w in c.split()[2:])]
        i += 1
    out = []
    for cmd in found:
        words = cmd.split()
        while words and re.match(r"^[A-Z_]+=\S*$", words[0]):  # VAR=value before the command
            words = words[1:]
        if len(words) >= 2 and words[0] == "trainprof" and words[1] in COMMANDS:
            out.append(" ".join(words))
    return out


def _argv(line: str) -> list[str]:
    line = re.sub(r"\$\([^)]*\)", "12345", line)  # $(pgrep ...) stands for a pid
    words = shlex.split(line, comments=True)[1:]
    for k, word in enumerate(words):
        if word in SHELL_ENDS or word.startswith((">", "2>")):
            return words[:k]
    return words


def parse(argv: list[str]) -> None:
    """Parse like `trainprof ARGV` does, through the command's options, without running it."""
    name, rest = argv[0], argv[1:]
    with CLI.make_context("trainprof", [name], resilient_parsing=False) as parent:
        sub = CLI.get_command(parent, name)
        assert sub is not None, name
        try:
            sub.make_context(name, rest, parent=parent)
        except typer.Exit:  # --help
            pass


RULE_PAGES = sorted((ROOT / "docs" / "rules").glob("*.md"))
CASES = [
    (doc, line)
    for doc in [*DOCS, ROOT / "CONTRIBUTING.md", *RULE_PAGES]
    for line in _command_lines(doc.read_text(encoding="utf-8"))
]


def test_the_docs_show_commands() -> None:
    shown = {line.split()[1] for _, line in CASES}
    assert {"run", "attach", "report", "ci", "compare", "doctor", "rules", "demo"} <= shown


@pytest.mark.parametrize(("doc", "line"), CASES, ids=[f"{d.name}:{line[:60]}" for d, line in CASES])
def test_every_command_line_shown_parses(doc: Path, line: str) -> None:
    try:
        parse(_argv(line))
    except ClickException as exc:
        pytest.fail(f"{doc.relative_to(ROOT)}: `{line}` does not parse: {exc.format_message()}")


def test_a_wrong_line_fails_to_parse() -> None:
    """The check can fail: an option that does not exist, or one without its value."""
    for bad in ("trainprof report --no-such-option", "trainprof compare", "trainprof ci --steps"):
        with pytest.raises(ClickException):
            parse(_argv(bad))


def test_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines: move detail to docs/guide/"
    wide = [n for n, line in enumerate(lines, 1) if len(line) > 100]
    assert not wide, f"README.md lines over 100 columns: {wide[:10]}"


def test_readme_holds_one_whole_demo_report() -> None:
    """`make docs` puts the demo's real output between the markers: a whole report."""
    text = README.read_text(encoding="utf-8")
    assert text.count(DEMO_BEGIN) == 1 and text.count(DEMO_END) == 1
    block = text.split(DEMO_BEGIN, 1)[1].split(DEMO_END, 1)[0]
    intro = " ".join(block.split("```", 1)[0].split())
    assert "`trainprof run demo_train.py`" in intro and "captured by `make docs` on 20" in intro
    for part in (
        "╭─ trainprof report",
        "command  python demo_train.py",
        "╭─ findings",
        "fake-batching",
    ):
        assert part in block, f"the demo report lacks {part!r}: run `make docs`"
    assert re.search(r"^report again: trainprof report trainprof-runs/\S+$", block, re.MULTILINE)
    boxed = [line for line in block.splitlines() if line.startswith(("╭", "│", "╰"))]
    assert len({len(line) for line in boxed}) == 1, "the report's panels are not whole"
    assert "/tmp/" not in block and "/home/" not in block


def test_the_run_guide_shows_the_readme_demo_report() -> None:
    """One capture, two pages: `make docs` writes the same block into both."""

    def demo(page: Path) -> str:
        text = page.read_text(encoding="utf-8")
        assert text.count(DEMO_BEGIN) == 1 and text.count(DEMO_END) == 1, page.name
        return text.split(DEMO_BEGIN, 1)[1].split(DEMO_END, 1)[0]

    assert demo(ROOT / "docs" / "guide" / "run.md") == demo(README)


@pytest.mark.parametrize("doc", [*DOCS, *sorted((ROOT / "examples" / "ci").glob("*"))])
def test_no_doc_installs_trainprof_from_the_package_index(doc: Path) -> None:
    assert not re.search(r"pip install\s+trainprof\b", doc.read_text(encoding="utf-8")), doc.name


@pytest.mark.parametrize("doc", [*DOCS, ROOT / "CONTRIBUTING.md"], ids=lambda d: d.name)
def test_every_relative_link_leads_to_a_file(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        path = (doc.parent / target.split("#", 1)[0]).resolve()
        assert path.exists(), f"{doc.name} links to {target}, which does not exist"


@pytest.mark.parametrize("name", ["attach", "report", "ci", "compare", "doctor"])
def test_readme_excerpts_are_captured(name: str) -> None:
    """`make docs` fills each excerpt from a real run; an empty one was never captured."""
    text = README.read_text(encoding="utf-8")
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    assert text.count(begin) == 1 and text.count(end) == 1
    block = text.split(begin, 1)[1].split(end, 1)[0].strip()
    assert block.startswith("```\n") and block.endswith("\n```") and len(block) > 10, block
    assert "/tmp/" not in block and "/home/" not in block
