"""The same job on the same machine gets the same first finding, run after run: a sample of the
zoo, each case three times back to back (``python -m bench.stability`` runs the whole set).
Whether a healthy control stays clean is the zoo tests' to say; here, that it does not flip."""

from __future__ import annotations

import pytest

from bench.stability import firsts
from trainprof.examples.zoo import ZOO


@pytest.mark.parametrize("case", ["loop_overhead", "healthy_stream"])
def test_three_runs_give_one_first_finding(case: str) -> None:
    got = firsts(case, 3)
    assert len(set(got)) == 1, got
    if ZOO[case].expect is not None:
        assert got[0] == ZOO[case].expect, got
