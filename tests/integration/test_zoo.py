"""Every zoo script, run for real under trainprof: its rule comes first; healthy ones stay quiet.

Each script runs once (module-scoped cache) and several assertions read the stored run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import Result, live_group_members, run_trainprof

from trainprof.examples.zoo import ZOO, script_path

SLOW = sorted(n for n, c in ZOO.items() if c.kind == "slow")
HEALTHY = sorted(n for n, c in ZOO.items() if c.kind == "healthy")
BROKEN = sorted(n for n, c in ZOO.items() if c.kind in ("crash", "hang"))

_cache: dict[str, Result] = {}
NO_LINE = {"worker-startup", "memory-growth"}  # about processes, not a line of the loop


@pytest.fixture(scope="module")
def zoo_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("zoo")


def run_case(name: str, tmp: Path) -> Result:
    if name not in _cache:
        case = ZOO[name]
        _cache[name] = run_trainprof(
            tmp,
            str(script_path(name)),
            run_args=("--timeout", str(case.timeout_s)),
            timeout=case.timeout_s + 60,
        )
    return _cache[name]


def _describe(r: Result) -> str:
    findings: list[dict[str, Any]] = (r.report or {}).get("findings", [])
    return (
        "\n".join(f"{f['id']} {f['severity']} {f['impact']} {f['evidence'][:2]}" for f in findings)
        or r.stderr[-3000:]
    )


@pytest.mark.parametrize("name", SLOW)
def test_slow_zoo_case_is_named_first(name: str, zoo_tmp: Path) -> None:
    r = run_case(name, zoo_tmp)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.problems, f"{name}: nothing found\n{_describe(r)}"
    assert r.problems[0] == ZOO[name].expect, f"{name}:\n{_describe(r)}"
    first = r.report["findings"][0]
    assert first["evidence"] and first["fix"]
    if first["id"] not in NO_LINE:  # the rule names the user's own line
        assert first["where"] and f"{name}.py:" in first["where"], first


@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_zoo_case_gets_no_warning(name: str, zoo_tmp: Path) -> None:
    r = run_case(name, zoo_tmp)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.problems == [], f"false alarm on {name}:\n{_describe(r)}"


@pytest.mark.parametrize("name", BROKEN)
def test_crash_and_hang_zoo_cases_name_the_cause_first(name: str, zoo_tmp: Path) -> None:
    case = ZOO[name]
    r = run_case(name, zoo_tmp)
    assert r.returncode != 0, f"{name} did not fail"
    assert r.problems, f"{name}: nothing found\n{_describe(r)}"
    assert r.problems[0] == case.expect, f"{name}:\n{_describe(r)}"
    first = r.report["findings"][0]
    assert first["severity"] == "error" and first["evidence"] and first["fix"]
    assert live_group_members(r.report["run"]["pid"]) == [], "orphaned job processes"
    if case.kind == "hang":
        assert "hang" in r.problems
        stacks = (r.run_dir / "hang-stacks.txt").read_text()
        assert stacks.count("=== pid") >= 3, "main and both workers should be dumped"
        assert any("128" in e for e in first["evidence"]), "the measured fd limit is evidence"


def test_cpu_stall_names_the_user_function(zoo_tmp: Path) -> None:
    if "cpu_stall" not in ZOO:
        pytest.skip("no cpu_stall zoo case")
    r = run_case("cpu_stall", zoo_tmp)
    first = r.report["findings"][0]
    assert first["where"] and "cpu_stall.py:" in first["where"]
    assert "every 30 steps" in " ".join(first["evidence"])


def test_samples_per_second_is_reported_beside_it_per_second(zoo_tmp: Path) -> None:
    r = run_case(HEALTHY[0], zoo_tmp)
    s = r.report["summary"]
    assert s["samples_per_s"] and s["steps_per_s"]
    assert s["samples_per_s"] > s["steps_per_s"]
