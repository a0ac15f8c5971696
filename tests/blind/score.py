"""Score trainprof's first finding on the blind scripts against EXPECTED.md.

Runs each script once under `trainprof run -q --json`, prints its first warning or error
finding, its `where`, and whether they match, then the total. Usage:

    .venv/bin/python tests/blind/score.py [--set DIR] [--keep DIR] [SCRIPT ...]

`--set DIR` scores another blind set (a folder with its scripts and EXPECTED.md; default
this one); `--keep DIR` keeps each run's report as DIR/SCRIPT.json. A set whose table has a
fourth column, a second cause that compounds the first, is scored on it too: the first finding
must say both (its id one of the two, its evidence naming the other).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
TRAINPROF = REPO / ".venv" / "bin" / "trainprof"


@dataclass
class Expected:
    script: str
    finding: str  # "none" for a control
    where: list[str]  # function names, any of which matches
    second: str | None = None  # a rule id that compounds the first (a four-column table)


@dataclass
class Outcome:
    finding: str  # "none", or "(no report: ...)"
    where: str
    id_ok: bool
    where_ok: bool
    both_ok: bool | None = None  # the first finding says both causes (None: none expected)


def read_expected(folder: Path = HERE) -> list[Expected]:
    rows = []
    in_table = False  # the expected findings' table, not the costs' table after it
    for line in (folder / "EXPECTED.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[:2] == ["script", "expected first finding"]:
            in_table = True
        elif not line.strip().startswith("|"):
            in_table = False
        if not in_table or len(cells) not in (3, 4) or not cells[0].endswith(".py"):
            continue
        where = cells[2].replace("\\_", "_")
        names = [] if where == "-" else [w.strip() for w in where.split(" or ")]
        second = cells[3] if len(cells) == 4 and cells[3] not in ("-", "") else None
        rows.append(Expected(cells[0], cells[1], names, second))
    return rows


def function_of(where: str) -> str:
    """The function a `file:line (function)` location names: the callee of `caller → callee()`."""
    m = re.search(r"\((.*)\)\s*$", where)
    name = (m.group(1) if m else where).split("→")[-1].strip()
    return name.removesuffix("()").split(".")[-1].strip()


def run_one(exp: Expected, tmp: Path, folder: Path = HERE) -> Outcome:
    report = tmp / f"{exp.script}.json"
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    cmd = [str(TRAINPROF), "run", "-q", "--timeout", "120", "--run-dir", str(tmp / exp.script)]
    cmd += ["--json", str(report), str(folder / exp.script)]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    if not report.exists():
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return Outcome(f"(no report: exit {proc.returncode}: {tail})", "", False, False)
    findings = json.loads(report.read_text()).get("findings") or []
    serious = [f for f in findings if f.get("severity") in ("warning", "error")]
    if not serious:
        ok = exp.finding == "none"
        return Outcome("none", "", ok, ok)
    first = serious[0]
    where = first.get("where") or ""
    id_ok = first.get("id") == exp.finding
    where_ok = id_ok and function_of(where) in exp.where
    both_ok = None
    if exp.second is not None:
        said = " ".join(first.get("evidence") or [])
        pair = {exp.finding, exp.second}
        both_ok = first.get("id") in pair and all(
            i == first.get("id") or f"with {i} (" in said for i in pair
        )
    return Outcome(str(first.get("id")), where, id_ok, where_ok, both_ok)


def main(argv: list[str]) -> int:
    folder = HERE
    if argv[:1] == ["--set"] and len(argv) > 1:
        folder = Path(argv[1]).resolve()
        argv = argv[2:]
    rows = read_expected(folder)
    keep: Path | None = None
    if argv[:1] == ["--keep"] and len(argv) > 1:
        keep = Path(argv[1])
        keep.mkdir(parents=True, exist_ok=True)
        argv = argv[2:]
    if argv:
        wanted = {a if a.endswith(".py") else a + ".py" for a in argv}
        rows = [r for r in rows if r.script in wanted]
    cases = ids = full = controls = controls_clean = pairs = pairs_said = 0
    print(f"{'script':24} {'expected':18} {'first finding':18} id  where  location")
    with tempfile.TemporaryDirectory() as tmp:
        for exp in rows:
            out = run_one(exp, Path(tmp), folder)
            report = Path(tmp) / f"{exp.script}.json"
            if keep is not None and report.exists():
                (keep / report.name).write_bytes(report.read_bytes())
            if exp.finding == "none":
                controls += 1
                controls_clean += out.id_ok
            else:
                cases += 1
                ids += out.id_ok
                full += out.where_ok
            if out.both_ok is not None:
                pairs += 1
                pairs_said += out.both_ok
            mark = lambda ok: "yes" if ok else "no"  # noqa: E731
            print(
                f"{exp.script:24} {exp.finding:18} {out.finding:18} {mark(out.id_ok):3} "
                f"{mark(out.where_ok):6} {out.where}"
                + ("" if out.both_ok is None else f"  both said: {mark(out.both_ok)}"),
                flush=True,
            )
    print(
        f"score: {ids}/{cases} first finding right, {full}/{cases} with its where; "
        f"controls clean {controls_clean}/{controls}"
        + (f"; both causes said {pairs_said}/{pairs}" if pairs else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
