"""`trainprof rules`: the rules reference, from the registry (thin: parse, pick, render).

Exit 0; 2 on bad input (an unknown rule id, --markdown with --json, an unwritable path) via
TrainprofError.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from trainprof.commands.options import NoColor
from trainprof.errors import TrainprofError
from trainprof.store.rundir import check_readable

if TYPE_CHECKING:
    from trainprof.analysis.rules.registry import Rule


def _known(name: str) -> str | None:
    """The rule id name stands for (CPU_STALL is cpu-stall), or None."""
    from trainprof.analysis.rules import all_rules

    wanted = name.strip().lower().replace("_", "-")
    return wanted if any(r.id == wanted for r in all_rules()) else None


def _pick(rule_id: str | None) -> tuple[Rule, ...]:
    from trainprof.analysis.rules import all_rules  # here: the other commands do not load it
    from trainprof.render import rules_reference as ref

    rules = all_rules()
    if rule_id is None:
        return rules
    wanted = _known(rule_id)
    found = tuple(r for r in rules if r.id == wanted)
    if found:
        return found
    close = ref.close_matches(rule_id, rules)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    raise TrainprofError(f"no rule {rule_id!r}; {hint}`trainprof rules` lists them all")


def _write_json(data: object, path: Path) -> None:
    """As every command's --json: the file 0600, its parents made; `-` is stdout."""
    from trainprof.store.rundir import check_user_file, write_user_file

    check_user_file(path)
    try:
        write_user_file(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    except OSError as exc:
        raise TrainprofError(f"cannot write --json {path}: {exc.strerror or exc}") from None
    if str(path) != "-":
        typer.echo(f"trainprof rules: wrote {path}", err=True)


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
            help="Print Markdown: the rules table, or with an ID its page (docs/rules/ID.md).",
        ),
    ] = False,
    json_path: Annotated[
        Path | None,
        typer.Option(
            "--json",
            metavar="PATH",
            help="Write the rules as JSON (schema trainprof.rules/1) to this path (`-`: stdout).",
        ),
    ] = None,
    no_color: NoColor = False,
) -> None:
    """List the rules a report can fire: id, family, severity, the signals each needs, its
    thresholds and what it finds. With an ID, that rule in full, as its page in docs/rules/
    has it: what each signal and threshold means, the time it claims, an anti-pattern, the
    best practice and a real finding.

    Example:

        trainprof rules cpu-stall"""
    if markdown and json_path is not None:
        raise TrainprofError("--markdown and --json: pick one")
    from trainprof.render import rules_reference as ref
    from trainprof.render.text import make_console

    if json_path is not None:
        check_readable(json_path, "--json", "write")
    if json_path is not None and rule_id is None and not json_path.exists():
        # `rules --json cpu-stall`, from when --json was a flag: that rule, on stdout
        old = _known(str(json_path))
        if old is not None:
            rule_id, json_path = old, Path("-")
    picked = _pick(rule_id)
    if markdown:
        text = ref.rule_page(picked[0]) if rule_id else ref.markdown_table(picked)
        typer.echo(text, nl=False)
    elif json_path is not None:
        _write_json(ref.registry_json(picked), json_path)
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
        ref.print_rule(make_console(), picked[0])
