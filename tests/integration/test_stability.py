"""The same job on the same machine gets the same first finding, run after run: a sample of the
zoo, each case twice back to back (``python -m bench.stability`` runs the whole set, 3 times).
Whether a healthy control stays clean is the zoo tests' to say; here, that it does not flip.

The first run is test_zoo's (conftest's ``zoo_run``, the same `trainprof run -q --timeout` of
the same script that bench.stability makes, asked for here first); the second is
bench.stability's."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ZooRun

from bench.stability import first_finding
from trainprof.examples.zoo import ZOO


@pytest.mark.parametrize("case", ["loop_overhead", "healthy_stream"])
def test_two_runs_give_one_first_finding(case: str, zoo_run: ZooRun, tmp_path: Path) -> None:
    first = zoo_run(case)
    got = ["(no report)" if first.report is None else (first.problems or ["none"])[0]]
    got.append(first_finding(case, tmp_path, 1))
    assert len(set(got)) == 1, got
    if ZOO[case].expect is not None:
        assert got[0] == ZOO[case].expect, got
