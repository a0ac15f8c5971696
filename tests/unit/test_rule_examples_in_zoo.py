"""A rule names its zoo scripts (``examples=``); the zoo's table names no rule."""

from __future__ import annotations

import re

import pytest

from trainprof.analysis.rules import all_rules, example_of
from trainprof.analysis.rules.registry import RuleError, define
from trainprof.examples.zoo import ZOO, ZOO_DIR, script_path


def test_every_example_a_rule_names_is_a_zoo_script() -> None:
    for r in all_rules():
        for name in r.examples:
            assert name in ZOO, f"{r.id}: no zoo script {name}"
            assert script_path(name).is_file()


def test_a_zoo_script_is_the_example_of_one_rule_at_most() -> None:
    named = [n for r in all_rules() for n in r.examples]
    assert len(named) == len(set(named))
    assert example_of("input_bound") == "input-bound"
    assert example_of("healthy_stream") is None
    assert ZOO["input_bound"].expect == "input-bound"


def test_a_second_rule_cannot_claim_a_script_already_named() -> None:
    doc = "Anti-pattern::\n\n    x\n\nBest practice::\n\n    y\n"
    with pytest.raises(RuleError, match="input_bound is input-bound's example"):
        define(
            id="test-claims-input-bound",
            title="t",
            family="input",
            severity="warning",
            needs=(),
            claims=(),
            thresholds=(),
            check=None,
            doc=doc,
            examples=("input_bound",),
        )


def test_the_zoo_table_names_no_rule_id() -> None:
    table = (ZOO_DIR / "__init__.py").read_text(encoding="utf-8")
    ids = {r.id for r in all_rules()}
    quoted = set(re.findall(r'"([a-z0-9]+(?:-[a-z0-9]+)+)"', table))
    assert not quoted & ids, sorted(quoted & ids)
