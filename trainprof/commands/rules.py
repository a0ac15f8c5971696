"""`trainprof rules`: the rules reference, from the registry (thin: parse, pick, render).

Exit 0; 2 on bad input (an unknown rule id, or both --markdown and --json) via TrainprofError.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from trainprof.commands.options import NoColor
from trainprof.errors import TrainprofError
from trainprof.render.text import make_console

if TYPE_CHECKING:
    from trainprof.analysis.rules.registry import Rule


def _pick(rule_id: str | None) -> tuple[Rule, ...]:
    from trainprof.analysis.rules import all_rules  # here: the other commands do not load it
    from trainprof.render import rules_reference as ref

    rules = all_rules()
    if rule_id is None:
        return rules
    wanted = rule_id.strip().lower().replace("_", "-")  # CPU_STALL is cpu-stall
    found = tuple(r for r in rules if r.id == wanted)
    if found:
        return found
    close = ref.close_matches(rule_id, rules)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    raise TrainprofError(f"no rule {rule_id!r}; {hint}`trainprof rules` lists them all")


def rules(
    rule_id: Annotated[
        str | None,
        typer.Argument(
            metavar="ID",
            help="A rule id (cpu-stall, input-bound, cuda-oom, ...): show that rule in full.",
            show_default=False,
        ),
    ] = None,
    markdown: Annotated[
        bool,
        typer.Option(
            "--markdown",
            help="Print the Markdown rules table (the README's, regenerated from the registry).",
        ),
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print the rules as JSON (schema trainprof.rules/1)."),
    ] = False,
    no_color: NoColor = False,
) -> None:
    """List the rules a report can fire: id, family, severity, the signals each needs, its
    thresholds and what it finds. With an ID, that rule in full: what each signal and threshold
    means, the time it claims, an anti-pattern and the best practice. --markdown and --json
    print all rules, or the one."""
    if markdown and as_json:
        raise TrainprofError("--markdown and --json: pick one")
    from trainprof.render import rules_reference as ref

    picked = _pick(rule_id)
    if markdown:
        typer.echo(ref.markdown_table(picked), nl=False)
    elif as_json:
        typer.echo(json.dumps(ref.registry_json(picked), indent=2, ensure_ascii=False))
    elif rule_id is None:
        console = make_console()
        console.print(ref.rules_table(picked, console.width))
        console.print()
        console.print(
            f"{len(picked)} rules. `trainprof rules ID` shows one in full.",
            style="dim",
            markup=False,
            highlight=False,
        )
    else:
        make_console().print(ref.rule_detail(picked[0]))
