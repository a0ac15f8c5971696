"""The run-wide totals of the host samples: trainprof's own cost from its cumulative readings,
and the job's peak memory on PSS where every process had one, else on RSS."""

from __future__ import annotations

import math
from typing import Any

import pytest

from trainprof.store.host_totals import own_cost, own_cost_json, peak_memory
from trainprof.store.session import Samples

MIB = 2**20


def samples(*rows: dict[str, Any]) -> Samples:
    s = Samples()
    for row in rows:
        s.add(row)
    return s


def proc(pid: int, rss_mib: int, pss_mib: int | None = None) -> dict[str, Any]:
    p: dict[str, Any] = {"pid": pid, "rss": rss_mib * MIB, "cpu": 10.0}
    if pss_mib is not None:
        p["pss"] = pss_mib * MIB
    return p


def test_own_cost_is_the_rise_of_the_cumulative_readings_over_the_span() -> None:
    s = samples(
        {"t": 10.0, "procs": [], "own_s": [0.05, 0.0]},
        {"t": 10.5, "procs": [], "own_s": "damaged"},  # unread: skipped, not 0
        {"t": 30.0, "procs": [], "own_s": [0.45, 0.6]},
    )
    cost = own_cost(s, 2)
    assert cost is not None
    assert cost.supervisor_s == pytest.approx(0.4) and cost.helpers_s == pytest.approx(0.6)
    assert cost.span_s == pytest.approx(20.0)
    assert cost.wall_share == pytest.approx(0.05)  # 1 CPU-s in 20 s
    assert cost.machine_share == pytest.approx(0.025)  # of 2 CPUs
    out = cost.to_json()
    assert out["cpu_s"] == pytest.approx(1.0) and out["probe_in_job"] is None
    assert "not measured" in out["not_measured"]["probe_in_job"]


def test_own_cost_without_two_readings_is_not_measured_never_zero() -> None:
    assert own_cost(samples({"t": 1.0, "procs": [], "own_s": [0.1, 0.0]}), 2) is None
    assert own_cost(samples({"t": 1.0, "procs": []}, {"t": 2.0, "procs": []}), 2) is None
    out = own_cost_json(None, "not measured: why")
    assert out["cpu_s"] is None and out["machine_share"] is None
    assert out["not_measured"]["cpu_s"] == "not measured: why"


def test_unknown_usable_cpus_leave_the_machine_share_unmeasured() -> None:
    s = samples({"t": 0.0, "procs": [], "own_s": [0, 0]}, {"t": 4.0, "procs": [], "own_s": [1, 0]})
    cost = own_cost(s, None)
    assert cost is not None and cost.machine_share is None and cost.wall_share == 0.25


def test_the_tree_pss_sums_each_process_latest_reading_once_all_have_one() -> None:
    s = samples(
        {"t": 1.0, "procs": [proc(1, 900, 880)]},
        # a fork: the worker has no PSS read yet, so the tick's sum is unknown, not short
        {"t": 1.5, "procs": [proc(1, 900), proc(2, 850)]},
        {"t": 2.0, "procs": [proc(1, 900, 480), proc(2, 850, 450)]},
        {"t": 2.5, "procs": [proc(1, 910), proc(2, 860)]},  # latest readings carried
    )
    assert math.isnan(s.tree_pss[1])
    assert list(s.tree_pss[2:]) == [930 * MIB, 930 * MIB]
    assert list(s.tree_rss) == [900 * MIB, 1750 * MIB, 1750 * MIB, 1770 * MIB]
    peak = peak_memory(s)
    assert peak is not None and peak.basis == "pss"
    assert peak.bytes == 930 * MIB and peak.rss_sum_bytes == 1770 * MIB


def test_without_any_pss_the_peak_is_the_rss_sum_and_says_so() -> None:
    peak = peak_memory(samples({"t": 1.0, "procs": [proc(1, 300), proc(2, 200)]}))
    assert peak is not None and peak.basis == "rss" and peak.bytes == 500 * MIB
    assert peak_memory(Samples()) is None
