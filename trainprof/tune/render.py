"""`tune`'s results as a table and a copy-paste line for the terminal, and as JSON."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from trainprof.analysis.frameworks import NAMES, WORDS
from trainprof.tune.candidates import NOT_TRIED
from trainprof.tune.search import CEILING_NAMES, MIN_RUNS, UNDECIDED, Arm, Search


def _rate(arm: Arm) -> str:
    if not arm.rates:
        return "not measured"
    med = arm.median or 0.0
    if len(arm.rates) == 1:
        return f"{med:.1f} (1 run)"
    return f"{med:.1f} ({min(arm.rates):.1f}–{max(arm.rates):.1f}, {len(arm.rates)} runs)"


def _change(search: Search, arm: Arm) -> str:
    v = search.verdict(arm)
    if v.change is None:
        return "—"
    if v.spread is None:
        return f"{v.change:+.0%} (no spread)"
    return f"{v.change:+.0%} (±{v.spread:.0%})"


def render(console: Console, search: Search) -> None:
    """The table of candidates, the best combination or "nothing to gain", and what was not tried."""
    console.print(
        f"trainprof tune: {search.runs} runs of {search.steps} steps each in "
        f"{search.spent_s:.0f} s, on {search.usable_cpus} usable CPUs"
    )
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    for col in ("candidate", search.unit, "change", "verdict"):
        table.add_column(col)
    table.add_row(search.baseline.candidate.name, _rate(search.baseline), "", "baseline")
    for arm in search.arms:
        v = search.verdict(arm)
        verdict = v.verdict if arm.problem is None else f"{v.verdict}: {arm.problem}"
        if v.verdict == UNDECIDED:
            verdict = (
                f"undecided: {min(len(arm.rates), len(search.baseline.rates))} of {MIN_RUNS} runs"
            )
        table.add_row(arm.candidate.name, _rate(arm), _change(search, arm), verdict)
    console.print(table)
    if search.note:
        console.print(search.note)
    base = search.baseline.median
    if search.ceilings:
        console.print("Ceilings (one run each, the job's own settings):")
    for c in search.ceilings:
        if c.rate is None:
            console.print(f"  {CEILING_NAMES[c.name]}: not measured ({c.problem})")
        else:
            times = f", ×{c.rate / base:.2f} the job's" if base else ""
            console.print(f"  {CEILING_NAMES[c.name]}: {c.rate:.1f} {search.unit}{times}")
    best = search.best()
    if best is not None:
        v = search.verdict(best)
        console.print(
            f"Best: {best.candidate.name}: {v.change:+.0%} (±{v.spread:.0%}) {search.unit}"
        )
        for line in best.candidate.code():
            console.print(f"  {line}")
        words = framework_words(search.framework, best.candidate.settings)
        if words:
            console.print(f"  with {NAMES[search.framework or '']}: {words}")
    else:
        console.print(
            "Nothing to gain: no candidate was faster than the job's own settings beyond the noise"
        )
    for what, why in NOT_TRIED:
        console.print(f"{what}: {why}", style="dim")


def framework_words(framework: str | None, settings: dict[str, Any]) -> str | None:
    """The framework's own words for the loader settings changed (the Trainer's
    ``dataloader_num_workers``); None where it has none or the loop is the job's own."""
    words = WORDS.get(framework or "", {})
    said = [words[k] for k in ("workers", "persistent_workers") if k in words]
    if not ({"num_workers", "persistent_workers"} & settings.keys()) or not said:
        return None
    return "; ".join(said)


def to_json(search: Search) -> dict[str, Any]:
    """Everything measured: each candidate's rates, change, spread and verdict, and the best."""

    def arm_json(arm: Arm) -> dict[str, Any]:
        v = search.verdict(arm)
        return {
            "candidate": arm.candidate.name,
            "settings": arm.candidate.settings,
            "rates": [round(r, 3) for r in arm.rates],
            "median": round(arm.median, 3) if arm.median is not None else None,
            "change": round(v.change, 4) if v.change is not None else None,
            "spread": round(v.spread, 4) if v.spread is not None else None,
            "verdict": v.verdict,
            "problem": arm.problem,
            "code": arm.candidate.code(),
        }

    best = search.best()
    job = search.job
    return {
        "command": search.command,
        "usable_cpus": search.usable_cpus,
        "steps_per_run": search.steps,
        "unit": search.unit,
        "runs": search.runs,
        "spent_s": round(search.spent_s, 2),
        "job_settings": (
            {
                "num_workers": job.num_workers,
                "persistent_workers": job.persistent_workers,
                "threads": job.threads,
            }
            if job is not None
            else None
        ),
        "baseline": {
            "rates": [round(r, 3) for r in search.baseline.rates],
            "median": round(search.baseline.median, 3)
            if search.baseline.median is not None
            else None,
        },
        "candidates": [arm_json(a) for a in search.arms],
        "best": arm_json(best) if best is not None else None,
        "nothing_to_gain": best is None,
        "framework": search.framework,
        "framework_words": framework_words(search.framework, best.candidate.settings)
        if best is not None
        else None,
        "note": search.note,
        "not_tried": [{"setting": what, "why": why} for what, why in NOT_TRIED],
        "ceilings": {
            c.name: {
                "what": CEILING_NAMES[c.name],
                "rate": round(c.rate, 3) if c.rate is not None else None,
                "problem": c.problem,
            }
            for c in search.ceilings
        },
    }
