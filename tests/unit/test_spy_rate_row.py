"""The report's cost row says when py-spy sampled less often to keep within its budget, from
run.json's ``stacks.rate_changes``; a run whose rate never changed says nothing more."""

from __future__ import annotations

from trainprof.render.host_rows import spy_rate_text

CHANGES = [
    {"at_s": 2.1, "from_hz": 50, "to_hz": 33, "spy_cpu": 0.075, "budget": 0.05},
    {"at_s": 9.0, "from_hz": 33, "to_hz": 20, "spy_cpu": 0.06, "budget": 0.0375},
]


def test_each_lowering_is_in_the_chain_and_the_first_says_why() -> None:
    assert spy_rate_text({"rate_changes": CHANGES}) == (
        "py-spy lowered its rate 50 → 33 → 20 Hz from 2.1 s on: at 50 Hz it took 7.5% of a "
        "CPU, over its 5.0% budget"
    )


def test_no_change_or_an_unreadable_record_says_nothing() -> None:
    for stacks in (None, {}, {"rate_changes": []}, {"rate_changes": [{"at_s": "x"}]}, []):
        assert spy_rate_text(stacks) is None
