"""Run one real-world case plain and under trainprof, then check output, step count and finding.

Standard library only. A case is a directory under ``cases/`` with ``case.json`` (how to run it)
and ``expert.json`` (what an expert expects trainprof to find); README.md describes both. Both
runs of a case use the same paths (a fresh copy of the case directory as the working directory,
a freshly restored copy of the prepared data, a private HOME-side cache directory), so the
only difference between them is trainprof.

Run it by hand with ``python realworld/harness.py CASE_NAME...`` (every case without one).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
CASES = ROOT / "cases"
# No case may reach the network: the hubs' libraries are told so, and their caches are private.
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
# A traced run past its timeout gets SIGINT (trainprof stops the job and writes a partial
# report), and is killed this long after.
GRACE_S = 30.0
BLOCKING = ("error", "warning")
DIGITS = re.compile(r"[0-9.]+")
DIFF_LINES = 40


@dataclass(frozen=True, repr=False)
class Case:
    """One corpus case: how to run it (case.json) and what the expert expects (expert.json)."""

    name: str
    path: Path
    command: list[str]
    prepare: list[str] | None
    env: dict[str, str]
    links: dict[str, str]
    own_steps: dict[str, Any]
    volatile: list[str]
    timeout_s: float
    expert: dict[str, Any]
    # The expert's first fix as a patch of a working copy: {"file", "replace": [[old, new]...]}
    fix: dict[str, Any] | None = None
    # What the script learned, as it prints it: {"regex", "rel_tol"}; compared plain to fixed
    learned: dict[str, Any] | None = None

    @property
    def known_miss(self) -> str | None:
        return self.expert.get("known_miss")

    def __repr__(self) -> str:
        return f"Case({self.name})"


@dataclass
class Run:
    """What one run of a case's command left: exit code, output, wall time, and report."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    timed_out: bool
    # CPUs that processes other than this run's kept busy, on average over it (None: unread)
    others_cpus: float | None = None
    own_steps: int | None = None
    report: dict[str, Any] | None = None


def load_case(path: Path) -> Case:
    """Read a case directory's case.json and expert.json; a missing or odd key raises ValueError."""
    spec = json.loads((path / "case.json").read_text())
    expert = json.loads((path / "expert.json").read_text())
    for key in ("command", "own_steps", "timeout_s"):
        if key not in spec:
            raise ValueError(f"{path / 'case.json'}: no {key!r}")
    for key in ("first_finding", "why", "fix_mentions"):
        if key not in expert:
            raise ValueError(f"{path / 'expert.json'}: no {key!r}")
    own = spec["own_steps"]
    fix, learned = spec.get("fix"), spec.get("learned")
    if fix is not None and not (fix.get("file") and fix.get("replace")):
        raise ValueError(f"{path / 'case.json'}: fix needs file and replace")
    if (fix is None) != (learned is None or "regex" not in learned):
        raise ValueError(f"{path / 'case.json'}: fix and learned (with a regex) come together")
    if not ("regex" in own or ("file" in own and "json_key" in own)):
        raise ValueError(f"{path / 'case.json'}: own_steps needs regex, or file and json_key")
    return Case(
        name=path.name,
        path=path,
        command=list(spec["command"]),
        prepare=list(spec["prepare"]) if spec.get("prepare") else None,
        env=dict(spec.get("env") or {}),
        links=dict(spec.get("links") or {}),
        own_steps=dict(own),
        volatile=list(spec.get("volatile") or []),
        timeout_s=float(spec["timeout_s"]),
        expert=expert,
        fix=dict(fix) if fix else None,
        learned=dict(learned) if learned else None,
    )


def discover(root: Path = CASES) -> list[Case]:
    """Every case under root (a directory holding case.json), by name."""
    if not root.is_dir():
        return []
    return [load_case(p.parent) for p in sorted(root.glob("*/case.json"))]


BLOB_LINE = re.compile(r"^- `([^`]+)` ([0-9a-f]{40})$", re.MULTILINE)


def blob_id(data: bytes) -> str:
    """The git blob id of a file's bytes, as `git hash-object` prints it."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def modified_files(case: Case) -> tuple[int, list[str]]:
    """UPSTREAM.md's listed files (lines "- `path` <blob id>") and those whose bytes differ."""
    listed = BLOB_LINE.findall((case.path / "UPSTREAM.md").read_text())
    bad = []
    for rel, want in listed:
        path = case.path / rel
        got = blob_id(path.read_bytes()) if path.is_file() else "missing"
        if got != want:
            bad.append(f"{rel}: {got}, upstream {want}")
    return len(listed), bad


def expand(args: list[str], python: str, data: Path) -> list[str]:
    """The arguments with {python}, {data} and {realworld} (this folder) replaced, also inside
    longer strings."""
    here = str(Path(__file__).resolve().parent)
    return [
        a.replace("{python}", python).replace("{data}", str(data)).replace("{realworld}", here)
        for a in args
    ]


def mask(text: str, volatile: list[str]) -> list[str]:
    """The lines of text with volatile lines dropped and every run of digits and dots as '#'."""
    drop = [re.compile(v) for v in volatile]
    return [
        DIGITS.sub("#", line.rstrip())
        for line in text.splitlines()
        if not any(d.search(line) for d in drop)
    ]


def own_steps(case: Case, output: str, workdir: Path) -> int | None:
    """The optimizer-step count the script itself reports, by case.json's own_steps; None if absent."""
    spec = case.own_steps
    if "regex" in spec:
        found = re.findall(spec["regex"], output, flags=re.MULTILINE)
        if not found:
            return None
        offset = int(spec.get("offset", 0))
        if spec.get("count"):  # a script that prints one line per step, and no count
            return len(found) + offset
        counts = [int(m[0] if isinstance(m, tuple) else m) for m in found]
        # "sum": a script that restarts its count each epoch prints one total per epoch
        return (sum(counts) if spec.get("sum") else counts[-1]) + offset
    path = workdir / spec["file"]
    if not path.is_file():
        return None
    value = json.loads(path.read_text()).get(spec["json_key"])
    return None if value is None else int(value) + int(spec.get("offset", 0))


def learned_values(case: Case, output: str) -> list[str]:
    """Every match of case.json's learned regex in the output, in order (its non-empty groups
    joined by a space where it has several): the curve a fix must leave as it was."""
    assert case.learned is not None
    found = re.findall(case.learned["regex"], output, flags=re.MULTILINE)
    return [" ".join(g for g in m if g) if isinstance(m, tuple) else m for m in found]


def _same(a: str, b: str, rel_tol: float) -> bool:
    if a == b or rel_tol <= 0:
        return a == b
    xs, ys = a.split(), b.split()
    try:
        return len(xs) == len(ys) and all(
            abs(float(x) - float(y)) <= rel_tol * max(abs(float(x)), abs(float(y)))
            for x, y in zip(xs, ys, strict=True)
        )
    except ValueError:
        return False


def apply_fix(case: Case, work: Path) -> None:
    """Patch the working copy with the case's fix: each old string must occur exactly once."""
    assert case.fix is not None
    path = work / case.fix["file"]
    text = path.read_text()
    for old, new in case.fix["replace"]:
        if text.count(old) != 1:
            raise ValueError(
                f"{case.name}: fix: {old!r} occurs {text.count(old)} times in {path.name}"
            )
        text = text.replace(old, new)
    path.unlink()  # a fresh file: the copy may be a hard link or read-only
    path.write_text(text)


def first_finding(report: dict[str, Any] | None) -> dict[str, Any] | None:
    """The highest-ranked finding of severity warning or worse; None when there is none."""
    for f in (report or {}).get("findings") or []:
        if f.get("severity") in BLOCKING:
            return f
    return None


def _session_pids(sid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if int(fields[3]) == sid:  # state, ppid, pgrp, session
            pids.append(int(entry))
    return pids


def _kill_session(sid: int) -> None:
    """Kill every process of the session this harness started (the job's own groups too)."""
    for pid in _session_pids(sid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _busy_cpu_s() -> float | None:
    """CPU seconds the machine's CPUs spent busy since boot (/proc/stat); None if unreadable."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _own_cpu_s() -> float:
    """CPU seconds of this process and its waited-for descendants (the runs it started)."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        r = resource.getrusage(who)
        total += r.ru_utime + r.ru_stime
    return total


def _run(
    argv: list[str], cwd: Path, env: dict[str, str], timeout_s: float, interrupt: bool = False
) -> Run:
    busy0, own0 = _busy_cpu_s(), _own_cpu_s()
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        if interrupt:
            proc.send_signal(signal.SIGINT)
            try:
                out, err = proc.communicate(timeout=GRACE_S)
            except subprocess.TimeoutExpired:
                _kill_session(proc.pid)
                out, err = proc.communicate()
        else:
            _kill_session(proc.pid)
            out, err = proc.communicate()
    _kill_session(proc.pid)  # what the run left behind (a DataLoader worker, a server)
    wall = time.perf_counter() - start
    busy1 = _busy_cpu_s()
    others = None
    if busy0 is not None and busy1 is not None and wall > 0:
        others = max(0.0, (busy1 - busy0) - (_own_cpu_s() - own0)) / wall
    return Run(argv, proc.returncode, out, err, wall, timed_out, others)


class Sandbox:
    """The fixed paths both runs of a case use: a working copy, the data, a private cache."""

    def __init__(self, case: Case, base: Path, python: str) -> None:
        self.case = case
        self.base = base
        self.python = python
        self.work = base / "work"
        self.data = base / "data"
        self.pristine = base / "data.prepared"
        self.home_cache = base / "cache"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        for key in ("PYTHONPATH", "PYTHONSTARTUP", "PYTHONINSPECT"):
            env.pop(key, None)
        env.update(OFFLINE)
        env["HF_HOME"] = str(self.home_cache / "huggingface")
        env["XDG_CACHE_HOME"] = str(self.home_cache)
        env["PYTHONUNBUFFERED"] = "1"
        env["PATH"] = os.path.dirname(self.python) + os.pathsep + env.get("PATH", "")
        for key, value in self.case.env.items():
            env[key] = expand([value], self.python, self.data)[0]
        return env

    def reset(self) -> None:
        """Lay the working copy, the prepared data and an empty cache anew."""
        for p in (self.work, self.data, self.home_cache):
            shutil.rmtree(p, ignore_errors=True)
        shutil.copytree(self.case.path, self.work)
        for name, target in self.case.links.items():
            (self.work / name).symlink_to(expand([target], self.python, self.data)[0])
        if self.pristine.exists():
            shutil.copytree(self.pristine, self.data)
        else:
            self.data.mkdir(parents=True)
        self.home_cache.mkdir(parents=True)

    def prepare(self) -> Run | None:
        """Run the case's prepare command once; its data is restored before each run."""
        if self.case.prepare is None:
            return None
        self.reset()
        argv = expand(self.case.prepare, self.python, self.data)
        run = _run(argv, self.work, self.env(), self.case.timeout_s)
        if run.returncode == 0:
            shutil.copytree(self.data, self.pristine)
        return run


def run_plain(box: Sandbox) -> Run:
    """The case's command as it is."""
    box.reset()
    argv = expand(box.case.command, box.python, box.data)
    run = _run(argv, box.work, box.env(), box.case.timeout_s)
    run.own_steps = own_steps(box.case, run.stdout + run.stderr, box.work)
    return run


def run_fixed(box: Sandbox) -> Run:
    """The case's command as it is, on a working copy patched with the case's fix."""
    box.reset()
    apply_fix(box.case, box.work)
    argv = expand(box.case.command, box.python, box.data)
    run = _run(argv, box.work, box.env(), box.case.timeout_s)
    run.own_steps = own_steps(box.case, run.stdout + run.stderr, box.work)
    return run


def run_traced(box: Sandbox) -> Run:
    """The case's command under `trainprof run`, with its JSON report read back."""
    box.reset()
    report = box.base / "report.json"
    run_dir = box.base / "trainprof-run"
    for p in (report, run_dir):
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
    argv = [
        box.python,
        "-m",
        "trainprof",
        "run",
        "--quiet",
        "--no-color",
        "--json",
        str(report),
        "--run-dir",
        str(run_dir),
        "--",
        *expand(box.case.command, box.python, box.data),
    ]
    run = _run(argv, box.work, box.env(), box.case.timeout_s, interrupt=True)
    run.own_steps = own_steps(box.case, run.stdout + run.stderr, box.work)
    if report.is_file():
        run.report = json.loads(report.read_text())
    return run


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.splitlines()[-lines:])


def check_same_output(case: Case, plain: Run, traced: Run) -> list[str]:
    """Check 1: the same exit code, and the same stdout after masking; problems as lines."""
    problems = []
    if plain.timed_out or traced.timed_out:
        problems.append(
            f"timed out after {case.timeout_s:.0f} s: plain {plain.timed_out}, traced {traced.timed_out}"
        )
    if plain.returncode != traced.returncode:
        problems.append(
            f"exit code: plain {plain.returncode}, traced {traced.returncode}\n"
            f"plain stderr:\n{_tail(plain.stderr)}\ntraced stderr:\n{_tail(traced.stderr)}"
        )
    a, b = mask(plain.stdout, case.volatile), mask(traced.stdout, case.volatile)
    if a != b:
        diff = list(difflib.unified_diff(a, b, "plain stdout", "traced stdout", lineterm=""))
        more = f"\n... {len(diff) - DIFF_LINES} more diff lines" if len(diff) > DIFF_LINES else ""
        problems.append("stdout differs (digits masked):\n" + "\n".join(diff[:DIFF_LINES]) + more)
    return problems


def check_steps(traced: Run) -> list[str]:
    """Check 2: trainprof's step count within 1 of the script's own count."""
    if traced.own_steps is None:
        return ["the script's own step count was not found in its output (own_steps)"]
    if traced.report is None:
        return [f"trainprof wrote no report; its stderr:\n{_tail(traced.stderr)}"]
    counted = traced.report["summary"].get("steps")
    unit = traced.report["summary"].get("unit")
    if counted is None or abs(int(counted) - traced.own_steps) > 1:
        return [f"steps: trainprof {counted} ({unit}), the script {traced.own_steps}"]
    return []


def check_learned(case: Case, plain: Run, fixed: Run | None) -> list[str]:
    """Check 4: the expert's first fix leaves what the script learned as it was (case.json's
    learned: every match equal, or within rel_tol of each other)."""
    if fixed is None or case.learned is None:
        return []
    if fixed.timed_out or fixed.returncode != plain.returncode:
        return [
            f"the fixed run: exit code {fixed.returncode} (plain {plain.returncode}), "
            f"timed out {fixed.timed_out}\n{_tail(fixed.stderr)}"
        ]
    a = learned_values(case, plain.stdout + plain.stderr)
    b = learned_values(case, fixed.stdout + fixed.stderr)
    if not a:
        return ["learned: the plain run printed no match of the learned regex"]
    tol = float(case.learned.get("rel_tol", 0.0))
    if len(a) != len(b):
        return [
            f"learned: plain printed {len(a)} values, fixed {len(b)}: {a[-3:]} against {b[-3:]}"
        ]
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if not _same(x, y, tol):
            return [f"learned: value {i + 1} of {len(a)}: plain {x!r}, fixed {y!r} (rel_tol {tol})"]
    return []


def check_fix_excludes(case: Case, traced: Run) -> list[str]:
    """Check 5: no fix line of any finding matches one of expert.json's fix_excludes (regular
    expressions, case-insensitive): advice the expert knows to be wrong for this job."""
    patterns = case.expert.get("fix_excludes") or []
    if not patterns or traced.report is None:
        return []
    problems = []
    for f in traced.report.get("findings") or []:
        for line in f.get("fix") or []:
            for p in patterns:
                if re.search(p, line, flags=re.IGNORECASE):
                    problems.append(f"{f['id']}'s fix says {p!r}: {line!r}")
    return problems


def describe(finding: dict[str, Any] | None) -> str:
    if finding is None:
        return "no finding of severity warning or worse"
    fix = " | ".join(finding.get("fix") or [])
    return f"{finding['id']} ({finding['severity']}): {finding['title']}; fix: {fix}"


def _load_note(run: Run) -> str:
    if run.others_cpus is None:
        return ""
    return (
        f" (other processes kept {run.others_cpus:.1f} of the machine's {os.cpu_count()} CPUs "
        "busy during the traced run)"
    )


def check_finding(case: Case, traced: Run) -> list[str]:
    """Check 3: the first warning-or-worse finding is the expert's, and its fix names the setting."""
    problems = _check_finding(case, traced)
    return [p + _load_note(traced) for p in problems]


def _check_finding(case: Case, traced: Run) -> list[str]:
    if traced.report is None:
        return ["trainprof wrote no report"]
    got = first_finding(traced.report)
    want = case.expert["first_finding"]
    others = [f"{f['id']} ({f['severity']})" for f in traced.report.get("findings") or []]
    if want is None:
        if got is not None:
            return [f"expert: healthy; trainprof: {describe(got)}; all: {others}"]
        return []
    if got is None or got["id"] != want:
        return [f"first finding: expert {want}; trainprof {describe(got)}; all: {others}"]
    fix = "\n".join(got.get("fix") or [])
    missing = [s for s in case.expert["fix_mentions"] if s not in fix]
    if missing:
        return [f"the fix of {want} does not mention {missing}; it says: {fix!r}"]
    return []


@dataclass
class Outcome:
    """Both runs of a case and what each check found wrong (empty lists: it passed)."""

    case: Case
    prepare: Run | None
    plain: Run
    traced: Run
    output: list[str]
    steps: list[str]
    finding: list[str]
    fixed: Run | None = None
    learned: list[str] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)


# Every outcome run in this process, for a summary at the end (realworld/conftest.py).
OUTCOMES: list[Outcome] = []


def run_case(case: Case, base: Path, python: str = sys.executable) -> Outcome:
    """Prepare the case's data, run it plain and traced under base, and run the three checks."""
    box = Sandbox(case, base, python)
    prep = box.prepare()
    if prep is not None and prep.returncode != 0:
        raise RuntimeError(
            f"{case.name}: prepare exited {prep.returncode}:\n{_tail(prep.stdout)}\n{_tail(prep.stderr)}"
        )
    plain = run_plain(box)
    traced = run_traced(box)
    fixed = run_fixed(box) if case.fix is not None else None
    return Outcome(
        case,
        prep,
        plain,
        traced,
        check_same_output(case, plain, traced),
        check_steps(traced),
        check_finding(case, traced),
        fixed,
        check_learned(case, plain, fixed),
        check_fix_excludes(case, traced),
    )


def summary_line(o: Outcome) -> str:
    """One line per case: the wall times, the step counts and the first finding."""
    counted = (o.traced.report or {}).get("summary", {}).get("steps")
    got = first_finding(o.traced.report)
    others = "" if o.traced.others_cpus is None else f", other load {o.traced.others_cpus:.1f} CPUs"
    fixed = ""
    if o.fixed is not None:
        last = learned_values(o.case, o.fixed.stdout + o.fixed.stderr)[-1:] or ["none"]
        same = "unchanged" if not o.learned else "CHANGED"
        fixed = f", fixed {o.fixed.wall_s:.1f} s (learned {same}, last {last[0]!r})"
    return (
        f"{o.case.name}: plain {o.plain.wall_s:.1f} s, traced {o.traced.wall_s:.1f} s{fixed}{others}; "
        f"steps trainprof {counted}, script {o.traced.own_steps}; "
        f"first finding {got['id'] if got else None}, expert {o.case.expert['first_finding']}"
    )


def main(argv: list[str]) -> int:
    names = set(argv)
    cases = [c for c in discover() if not names or c.name in names]
    failed = 0
    for case in cases:
        with tempfile.TemporaryDirectory(prefix=f"realworld-{case.name}-") as tmp:
            o = run_case(case, Path(tmp))
        print(summary_line(o))
        problems = o.output + o.steps + o.finding + o.learned + o.excluded
        for problem in problems:
            print("  " + problem.replace("\n", "\n  "))
        failed += bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
