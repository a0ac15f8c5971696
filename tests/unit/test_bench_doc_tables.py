"""`python -m bench --doc docs/BENCHMARKS.md` writes each row it measured over the page's row of
the same measure: the page's tables and the bench's rows stay one structure."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench import doc_tables  # noqa: E402

PAGE = ROOT / "docs" / "BENCHMARKS.md"


def _cell(ratio: float, lo: float, hi: float, rate: float) -> dict[str, Any]:
    return {"steps_per_s": rate, "ratio": ratio, "ratio_min": lo, "ratio_max": hi, "n": 4}


# The shapes the bench's sections return (bench/overhead.py, workers.py, longrun.py).
RESULTS: dict[str, Any] = {
    "toggle": {
        "hooks": {"same": [0.4, 0.8], "all": [7.7, 0.9], "steps": [2.5, 1.2],
                  "loader": [4.0, 1.1], "fetch": [0.9, 1.4]},
        "toggle": [{"size": "64x8", "steps_per_s": 3650.0}],
    },
    "overhead": {
        "sizes": ["512x8", "1472x64", "2816x256"],
        "summary": [
            {"key": "plain", "cells": [_cell(1, 1, 1, 990.0), _cell(1, 1, 1, 110.0),
                                       _cell(1, 1, 1, 10.4)]},
            {"key": "trainprof", "cells": [_cell(0.99, 0.97, 1.01, 980.0),
                                           _cell(0.995, 0.991, 0.999, 109.0),
                                           _cell(1.0, 0.98, 1.02, 10.4)]},
        ],
    },
    "workers": {"summary": {
        "ratio": 0.99, "ratios": [0.97, 1.0, 1.01], "ratio_halfwidth": 0.02,
        "cpu_ratio": 0.992, "cpu_ratios": [0.98, 1.0], "cpu_ratio_halfwidth": None,
        "cpu_s": 0.5, "span_s": 17.0, "machine_share": 0.0147, "usable_cpus": 2,
        "supervisor_cpu_s": 0.15, "helpers_cpu_s": 0.35,
    }},
    "scale": {
        "generate": {"steps": 1_000_000, "hours": 24.0, "events_bytes": 35_000_000, "total_bytes": 50_000_000,
                     "samples_bytes": 15 * 2**20},
        "analysis": {"load_s": 1.3, "analyze_s": 1.1, "peak_rss_bytes": 90 * 2**20},
        "runner": {"runner_rss_live_max": 40 * 2**20, "runner_rss_first": 38 * 2**20,
                   "runner_rss_last_live": 39 * 2**20, "runner_rss_slope_mb_per_min": 0.02},
    },
    "complete": True,
    "bench_seconds": 431.0,
}  # fmt: skip


def test_a_full_run_replaces_the_pages_rows_in_place() -> None:
    text = PAGE.read_text(encoding="utf-8")
    measured = doc_tables.rows(RESULTS)
    assert all(measured.values()), measured  # every table gets rows
    out = doc_tables.update(text, measured, "2 CPUs, Linux, load 0.9", "2099-01-01")
    assert len(out.splitlines()) == len(text.splitlines()), "a row was added: keys drifted"
    new = [ln for ln in out.splitlines() if "2099-01-01" in ln]
    assert len(new) == sum(len(r) for r in measured.values())
    assert "| one-thread loop, 1472x64, default | 0.995 of plain at 110 steps/s (rounds " in out
    assert "| all hot-path hooks, in the loop | 7.7 ± 0.9 µs a step (A/A +0.4 ± 0.8; 64x8" in out
    assert "(rounds 0.97–1.01): unresolved" in out and "(rounds 0.99–1.00) |" in out
    gpu = [ln for ln in text.splitlines() if "| h200 |" in ln]
    assert gpu and all(ln in out.splitlines() for ln in gpu)  # other commands' rows kept


def test_a_new_measure_goes_at_its_tables_end() -> None:
    text = "x\n\n<!-- bench:suite -->\n| a | b | c | d | e |\n| - | - | - | - | - |\n| old | 1 | | | |\n\nafter\n"
    out = doc_tables.update(text, {"suite": [("new", "2 s")]}, "m", "2099-01-01")
    assert out.splitlines()[5:8] == [
        "| old | 1 | | | |",
        "| new | 2 s | 2099-01-01 | m | `make bench` |",
        "",
    ]


def test_a_table_the_page_lacks_is_an_error() -> None:
    with pytest.raises(ValueError, match="bench:hooks"):
        doc_tables.update("no tables\n", {"hooks": [("a", "b")]}, "m")


def test_a_skipped_section_writes_nothing() -> None:
    assert doc_tables.rows({}) == {"hooks": [], "process": [], "scale": [], "suite": []}


def test_a_run_shorter_than_a_day_writes_no_row_of_the_day() -> None:
    short = {**RESULTS, "scale": {**RESULTS["scale"]}}
    short["scale"]["generate"] = {**RESULTS["scale"]["generate"], "hours": 2.4}
    days = [m for m, _ in doc_tables.rows(short)["scale"]]
    assert days == ["the runner's memory while a job runs"]
