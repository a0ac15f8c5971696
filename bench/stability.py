"""The first finding of each zoo case, run several times back to back: the same job on the same
machine must get the same first finding, run after run.

    python -m bench.stability [--runs 3] [CASE ...]

Runs each CPU zoo case (``slow`` and ``healthy`` kinds; all of them without names) ``--runs``
times under ``trainprof run`` and prints, per case, the first warning or error finding of each
run, and the cases whose first finding changed. Exit 1 when any changed. A measurement: the
suite's test runs a sample of it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from trainprof.examples.zoo import ZOO, ZOO_DIR

TRAINPROF = [sys.executable, "-m", "trainprof"]


def first_finding(case: str, work: Path, k: int) -> str:
    """The id of the first warning or error of one run of zoo ``case`` ("none": none)."""
    out = work / f"{case}-{k}.json"
    subprocess.run(
        [*TRAINPROF, "run", "-q", "--timeout", str(ZOO[case].timeout_s), "--json", str(out),
         "--run-dir", str(work / f"{case}-{k}"), str(ZOO_DIR / f"{case}.py")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    try:
        findings = json.loads(out.read_text())["findings"]
    except (OSError, ValueError, KeyError):
        return "(no report)"
    problems = [f["id"] for f in findings if f.get("severity") != "info"]
    return problems[0] if problems else "none"


def firsts(case: str, runs: int) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="stability-") as tmp:
        return [first_finding(case, Path(tmp), k) for k in range(runs)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.stability", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("cases", nargs="*")
    a = ap.parse_args(argv)
    cases = a.cases or [n for n, c in ZOO.items() if c.kind in ("slow", "healthy")]
    changed = []
    for case in cases:
        got = firsts(case, a.runs)
        expected = ZOO[case].expect or "none"
        mark = "" if len(set(got)) == 1 else "   <- changed"
        print(f"{case:28} expected {expected:20} got {', '.join(got)}{mark}", flush=True)
        if len(set(got)) > 1:
            changed.append(case)
    print(
        f"\n{len(cases) - len(changed)} of {len(cases)} cases gave one first finding in {a.runs} runs"
    )
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
