"""Findings' fix lines with what `trainprof tune` measured of the same setting on this job.

A fix line that sets the DataLoader's ``num_workers`` or torch's threads is matched with the
tune candidate of that value: a faster one is quoted beside the bound predicted, or in place of
"effect not predicted" ("measured by trainprof tune: +31 % (±4 %)"); a slower one or one within
noise replaces the line's promise ("tried by trainprof tune: −23 % (±5 %): not advised").
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from trainprof.analysis.findings import Finding, Verdict

WORKERS = re.compile(r"num_workers\s*=\s*(\d+)")
THREADS = re.compile(r"(?:set_num_threads\(|OMP_NUM_THREADS=)(\d+)")
TUNABLE = re.compile(r"num_workers|set_num_threads|OMP_NUM_THREADS")


def annotate(verdict: Verdict, tuned: dict[str, Any] | None) -> Verdict:
    """The verdict with each matching fix line quoting tune's measurement."""
    if not tuned:
        return verdict
    arms = [a for a in tuned.get("candidates") or [] if isinstance(a, dict)]
    return dataclasses.replace(verdict, findings=tuple(_finding(f, arms) for f in verdict.findings))


def tunable(verdict: Verdict) -> bool:
    """Whether a shown fix sets something `trainprof tune` can measure."""
    return any(
        f.severity != "info" and any(TUNABLE.search(line) for line in f.fix)
        for f in verdict.findings
    )


def _finding(f: Finding, arms: list[dict[str, Any]]) -> Finding:
    fix = tuple(_line(line, arms) for line in f.fix)
    return f if fix == tuple(f.fix) else dataclasses.replace(f, fix=fix)


def _line(line: str, arms: list[dict[str, Any]]) -> str:
    arm = _arm_for(line, arms)
    if arm is None or arm.get("change") is None:
        return line
    change, spread = float(arm["change"]), arm.get("spread")
    told = f"{change:+.0%}" + (f" (±{float(spread):.0%})" if spread is not None else "")
    if arm.get("verdict") == "faster":  # beside the bound predicted, or in place of "not"
        return f"{line.split(' — effect not predicted')[0]} — measured by trainprof tune: {told}"
    head = line.split(" — expected:")[0].split(" — effect not predicted")[0]
    return f"{head} — tried by trainprof tune: {told}, {arm.get('verdict')}: not advised"


def _arm_for(line: str, arms: list[dict[str, Any]]) -> dict[str, Any] | None:
    workers, threads = WORKERS.search(line), THREADS.search(line)
    for arm in arms:
        settings = arm.get("settings") or {}
        if workers and settings.get("num_workers") == int(workers.group(1)):
            if threads is None or settings.get("threads") in (None, int(threads.group(1))):
                return arm
        if threads and not workers and settings.get("threads") == int(threads.group(1)):
            if settings.get("num_workers") is None:
                return arm
    return None
