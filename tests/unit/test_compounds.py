"""Two findings whose causes compound each say so: the pairs rules declare, and how they show."""

from __future__ import annotations

from dataclasses import replace

import pytest

from trainprof.analysis.findings import Finding
from trainprof.analysis.pipeline import said_together
from trainprof.analysis.rules import COMPOUNDS, REGISTRY
from trainprof.analysis.rules.registry import RuleError, compounding
from trainprof.render.rules_reference import compounds_of, rule_page


def _finding(id: str) -> Finding:
    return Finding(id=id, severity="warning", title=id, evidence=(f"{id} measured", "more"))


def test_the_first_of_two_compounding_findings_tells_how_the_second_points_back() -> None:
    starved, waits, alone = _finding("cpu-starved"), _finding("input-bound"), _finding("eval-stall")
    out = said_together((starved, waits, alone))
    how = COMPOUNDS[frozenset(("cpu-starved", "input-bound"))]
    assert out[0].evidence == (
        "cpu-starved measured",
        f"with input-bound (also found here): {how}",
        "more",
    )
    assert out[1].evidence[1] == (
        "with cpu-starved (also found here): how the two compound is said under cpu-starved"
    )
    assert how not in "".join(out[1].evidence)  # the pair's story is told once
    assert out[2] == alone


def test_a_finding_whose_partner_was_not_found_is_unchanged() -> None:
    findings = (_finding("cpu-starved"), _finding("memory-growth"))
    assert said_together(findings) == findings


def test_a_finding_with_two_partners_names_both() -> None:
    out = said_together(
        (_finding("cpu-starved"), _finding("input-bound"), _finding("loop-overhead"))
    )
    named = [line for line in out[0].evidence if line.startswith("with ")]
    assert [line.split(" (")[0] for line in named] == ["with input-bound", "with loop-overhead"]


def test_a_pair_declared_by_both_rules_or_naming_no_rule_is_refused() -> None:
    starved, waits = REGISTRY["cpu-starved"], REGISTRY["input-bound"]
    twice = {**REGISTRY, waits.id: replace(waits, compounds={"cpu-starved": "again"})}
    with pytest.raises(RuleError, match="declared twice"):
        compounding(twice)
    with pytest.raises(RuleError, match="unknown rule 'no-such-rule'"):
        compounding({starved.id: replace(starved, compounds={"no-such-rule": "how"})})


def test_both_rules_pages_show_the_pair() -> None:
    for pair, how in COMPOUNDS.items():
        for id in pair:
            (other,) = pair - {id}
            assert (other, how) in compounds_of(REGISTRY[id])
            assert f"[`{other}`]({other}.md)" in rule_page(REGISTRY[id])
