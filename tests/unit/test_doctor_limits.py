"""nofile-low: RLIMIT_NOFILE against the fds DataLoader workers hold with the sharing strategy."""

from __future__ import annotations

import resource

from trainprof.doctor.limits import NofileInputs, check_nofile, fds_in_flight, gather_nofile


def nofile(soft: int, hard: int, workers: int = 4, strategy: str | None = "file_descriptor"):
    return check_nofile(NofileInputs(soft, hard, workers, False, strategy))


def test_limit_below_fds_in_flight_fails_and_hard_limit_needs_raising() -> None:
    r = nofile(256, 256, workers=4)
    assert (r.status, r.finding.id) == ("fail", "nofile-low")
    assert str(fds_in_flight(4)) in r.finding.title
    assert any("--ulimit nofile=" in f for f in r.finding.fix)
    assert any("file_system" in f for f in r.finding.fix)


def test_common_1024_default_warns_with_file_descriptor_strategy() -> None:
    r = nofile(1024, 1048576)
    assert r.status == "warn"
    assert any(f.startswith("ulimit -n 65536") for f in r.finding.fix)


def test_file_system_strategy_needs_few_fds() -> None:
    r = nofile(1024, 1024, strategy="file_system")
    assert r.status == "ok"
    assert any("file_system" in e for e in r.finding.evidence)


def test_unknown_strategy_assumes_torch_default() -> None:
    r = nofile(1024, 4096, strategy=None)
    assert r.status == "warn"
    assert any("torch not importable" in e for e in r.finding.evidence)
    assert any(f.startswith("ulimit -n 4096") for f in r.finding.fix)


def test_real_limits_of_this_process() -> None:
    inp = gather_nofile(2, True, "file_descriptor")
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert inp.soft == soft or soft == resource.RLIM_INFINITY
    assert check_nofile(inp).finding.id == "nofile-low"
