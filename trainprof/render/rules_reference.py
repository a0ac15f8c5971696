"""The rules reference, generated from the rule registry: the Markdown table the README embeds,
the JSON form, and the rich views of `trainprof rules` (the list, and one rule in full).

Everything here only renders what the registry declares; nothing is judged or measured.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Iterable, Sequence

from rich import box
from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from trainprof.analysis import frameworks, ledger
from trainprof.analysis.rules.registry import Rule, Threshold
from trainprof.version import __version__

SCHEMA = "trainprof.rules/1"

# Each signal a rule may need, in plain words (what the run must have for the rule to judge).
SIGNAL_MEANING: dict[str, str] = {
    "steps": "a steady state of optimizer steps",
    "loader": "a torch DataLoader",
    "stacks": "py-spy stack samples",
    "samples": "host samples (psutil)",
    "cuda": "the model trains on CUDA",
    "gpu": "NVML samples of the job's GPUs",
    "machine_gpus": "NVML samples of the machine's GPUs (the job's or not)",
    "ranks": "a torchrun job with 2+ ranks",
    "stderr": "the job's output",
    "flops": "one step's FLOPs counted (CUDA, not under torch.compile) on a GPU with a known peak",
    "gpu_memory": "CUDA memory read at timed steps, and the card's total memory",
    "compiles": "torch.compile's compiles, timed by the probe from Dynamo's compile callbacks",
    "debug": "torch's debug switches (anomaly detection, a recording profiler, CUDA_LAUNCH_BLOCKING), read by the probe from the first optimizer step on",
    "schedstat": "the kernel's run-queue delay of the job's main thread (Linux schedstat)",
    "model": "the models (what the job called train() on, what its training loop holds) and its optimizers at the first step",
}

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
BLOCKS = ("Anti-pattern", "Best practice")
# Below this many columns the list folds needs and thresholds under each summary.
WIDE = 140


# ---- plain text from the registry -----------------------------------------------------------


def _literals(text: str) -> str:
    """reST ``literal`` → Markdown `literal` (the docstrings are reST, the outputs are not)."""
    return re.sub(r"``(.+?)``", r"`\1`", text)


def summary_paragraph(r: Rule) -> str:
    """The docstring's first paragraph, unwrapped onto one line."""
    first = r.doc.strip().split("\n\n", 1)[0]
    return _literals(" ".join(first.split())) or r.title


def one_line(r: Rule) -> str:
    """The first sentence of the summary paragraph (the list's and the table's summary)."""
    return re.split(r"(?<=[.!?])\s+(?=[A-Z`(])", summary_paragraph(r), maxsplit=1)[0]


def threshold_text(t: Threshold) -> str:
    """Compact: ``wait_frac 20%``."""
    return f"{t.name} {t}"


def close_matches(name: str, rules: Iterable[Rule]) -> list[str]:
    """Rule ids that contain the name, then ids difflib finds close to it (at most 4)."""
    ids = [r.id for r in rules]
    found = [i for i in ids if name and name.lower() in i]
    found += difflib.get_close_matches(name.lower(), ids, n=4, cutoff=0.6)
    return list(dict.fromkeys(found))[:4]


# ---- Markdown and JSON ----------------------------------------------------------------------


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown_table(rules: Sequence[Rule]) -> str:
    """The README's rules table: one row per rule, in registry order."""
    lines = [
        "| id | family | severity | needs | thresholds | summary |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rules:
        thresholds = "<br>".join(f"`{t.name}` {t}" for t in r.thresholds) or "—"
        cells = (
            f"`{r.id}`",
            r.family,
            r.severity,
            ", ".join(r.needs) or "—",
            thresholds,
            _md_cell(one_line(r)),
        )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def rule_json(r: Rule) -> dict[str, object]:
    return {
        "id": r.id,
        "title": r.title,
        "family": r.family,
        "severity": r.severity,
        "summary": summary_paragraph(r),
        "needs": list(r.needs),
        "claims": list(r.claims),
        "thresholds": [
            {"name": t.name, "value": t.value, "unit": t.unit, "text": str(t), "doc": t.doc}
            for t in r.thresholds
        ],
        "settings": {frameworks.NAMES[f]: text for f, text in r.settings.items()},
        "anti_pattern": r.block("Anti-pattern"),
        "best_practice": r.block("Best practice"),
    }


def registry_json(rules: Sequence[Rule]) -> dict[str, object]:
    """The registry as JSON: the rules, and what their signal and bucket names mean."""
    return {
        "schema": SCHEMA,
        "trainprof_version": __version__,
        "signals": dict(SIGNAL_MEANING),
        "buckets": dict(ledger.DESCRIPTION),
        "rules": [rule_json(r) for r in rules],
    }


# ---- rich: the list -------------------------------------------------------------------------


def _severity(r: Rule) -> Text:
    return Text(r.severity, style=SEVERITY_STYLE.get(r.severity, ""))


def _pack(first: str, rest: Sequence[str], width: int) -> str:
    """``first · a, b, c`` broken into lines of at most width, never inside an item."""
    lines, line = [], first
    for i, item in enumerate(rest):
        sep = " · " if i == 0 else ", "
        if line and len(line) + len(sep) + len(item) > width:
            lines.append(line + sep.rstrip())
            line = item
        else:
            line = line + sep + item if line else item
    return "\n".join([*lines, line])


def rules_table(rules: Sequence[Rule], width: int) -> Table:
    """Every rule, one row each. Wide terminals get a column per field; narrower ones fold the
    needs and thresholds under the summary, so the summary keeps room to be read."""
    table = Table(
        box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, expand=False, header_style="bold"
    )
    wide = width >= WIDE
    table.add_column("id", style="bold", no_wrap=True)
    if wide:
        table.add_column("family", no_wrap=True)
        table.add_column("severity", no_wrap=True)
        table.add_column("needs")
        table.add_column("thresholds", no_wrap=True)
        table.add_column("summary", ratio=1)
    else:
        table.add_column("family\nseverity", no_wrap=True)
        table.add_column("summary", ratio=1)
    id_w = max((len(r.id) for r in rules), default=2)
    fam_w = max([len("severity")] + [len(r.family) for r in rules])
    summary_w = max(20, width - id_w - fam_w - 7)
    last_family = None
    for r in rules:
        if last_family is not None and r.family != last_family:
            table.add_section()
        last_family = r.family
        thresholds = [threshold_text(t) for t in r.thresholds]
        if wide:
            table.add_row(
                r.id,
                r.family,
                _severity(r),
                Text(", ".join(r.needs)),
                Text("\n".join(thresholds)),
                Text(one_line(r)),
            )
        else:
            detail = _pack("needs " + ", ".join(r.needs), thresholds, summary_w)
            table.add_row(
                r.id,
                Text.assemble(r.family, "\n", _severity(r)),
                Text.assemble(one_line(r), "\n", (detail, "dim")),
            )
    return table


# ---- rich: one rule in full -----------------------------------------------------------------


def _heading(text: str) -> Text:
    return Text(text, style="bold cyan")


def _pairs(rows: Sequence[tuple[str, str]]) -> Table:
    """Two aligned columns (name, meaning), indented under a heading."""
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    for name, meaning in rows:
        table.add_row(name, Text(meaning))
    return table


def _lexer(code: str) -> str:
    """Python when the block parses as Python; some blocks are prose or shell commands."""
    try:
        ast.parse(code)
    except SyntaxError:
        return "text"
    return "python"


def code_block(code: str) -> Syntax:
    return Syntax(
        code,
        _lexer(code),
        theme="ansi_dark",
        background_color="default",
        word_wrap=True,
    )


def rule_detail(r: Rule) -> Group:
    """Title, summary, what it needs, thresholds, the ledger buckets it claims, both blocks."""
    head = Text.assemble((r.id, "bold"), "  ", r.title)
    meta = Text.assemble(("family ", "dim"), r.family, ("  severity ", "dim"), _severity(r))
    parts: list[RenderableType] = [head, meta, Text(""), Text(summary_paragraph(r)), Text("")]

    parts.append(_heading("needs (without these the rule is skipped; `trainprof run -v` says why)"))
    needs = [(n, SIGNAL_MEANING.get(n, "?")) for n in r.needs]
    parts.append(Padding(_pairs(needs) if needs else Text("nothing"), (0, 0, 1, 2)))

    parts.append(_heading("thresholds"))
    if r.thresholds:
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column(no_wrap=True, justify="right")
        grid.add_column()
        for t in r.thresholds:
            grid.add_row(t.name, str(t), Text(t.doc))
        parts.append(Padding(grid, (0, 0, 1, 2)))
    else:
        parts.append(Padding(Text("none"), (0, 0, 1, 2)))

    parts.append(_heading("claims (ledger buckets of steady time: its finding's impact)"))
    if set(r.claims) == set(ledger.BUCKETS):
        claims: RenderableType = Text(f"every bucket ({len(ledger.BUCKETS)})")
    elif r.claims:
        claims = _pairs([(c, ledger.DESCRIPTION.get(c, "?")) for c in r.claims])
    else:
        claims = Text("none: its findings carry no share of the time")
    parts.append(Padding(claims, (0, 0, 1, 2)))

    if r.settings:
        parts.append(_heading("in a framework's loop (added to the fixes when it runs the loop)"))
        names = [(frameworks.NAMES[f], text) for f, text in r.settings.items()]
        parts.append(Padding(_pairs(names), (0, 0, 1, 2)))

    for i, heading in enumerate(BLOCKS):
        below = 1 if i < len(BLOCKS) - 1 else 0
        parts.append(_heading(heading))
        parts.append(Padding(code_block(r.block(heading)), (0, 0, below, 2)))
    return Group(*parts)
