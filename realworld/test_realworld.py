"""One test per corpus case: plain and traced runs agree, steps agree, the expert's finding."""

from __future__ import annotations

from pathlib import Path

import harness
import pytest

CASES = harness.discover()
# Prepare, the plain, traced and fixed runs, each within the case's timeout, plus start-up.
SLACK_S = 60


def _param(case: harness.Case) -> object:
    runs = 4 if case.fix is not None else 3
    limit = int(runs * case.timeout_s + harness.GRACE_S + SLACK_S)
    return pytest.param(case, id=case.name, marks=pytest.mark.timeout(limit))


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_case(case: harness.Case, tmp_path: Path) -> None:
    o = harness.run_case(case, tmp_path)
    harness.OUTCOMES.append(o)
    # pytest.fail, not assert: the message says it all, and an Outcome's repr is pages long
    if o.output:
        pytest.fail(
            f"{case.name}: plain and traced runs differ\n" + "\n".join(o.output), pytrace=False
        )
    if o.steps:
        pytest.fail(f"{case.name}: " + "\n".join(o.steps), pytrace=False)
    # checks 4 and 5 never xfail: the first fix keeps what is learned, no excluded advice
    if o.learned or o.excluded:
        pytest.fail(f"{case.name}: " + "\n".join(o.learned + o.excluded), pytrace=False)
    if case.known_miss:
        if o.finding:
            pytest.xfail(f"known miss: {case.known_miss}\n" + "\n".join(o.finding))
        pytest.fail(f"{case.name}: marked known_miss but trainprof now agrees with the expert")
    if o.finding:
        pytest.fail(f"{case.name}: " + "\n".join(o.finding), pytrace=False)


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in CASES])
def test_upstream_unmodified(case: harness.Case) -> None:
    listed, bad = harness.modified_files(case)
    if not listed:
        pytest.skip("UPSTREAM.md lists no blob ids")
    assert not bad, f"{case.name}: files differ from upstream: {bad}"


def test_some_case_exists() -> None:
    assert CASES, f"no case.json under {harness.CASES}"
