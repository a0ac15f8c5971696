"""Regenerate the generated docs: the rule pages, and the README's reports from real runs.

    python -m tools.docs              # docs/rules/*.md, README.md's demo report and excerpts
    python -m tools.docs --pages      # docs/rules/*.md only (no job runs)
    python -m tools.docs --examples [ID ...]   # run the zoo: each rule's example finding

``make docs`` runs the first. ``--examples`` runs each rule's first zoo script this machine can
run (no GPU scripts without a GPU) under ``trainprof run``, keeps the finding as printed in
``trainprof/render/rule_examples.py``, then writes the pages; rules it could not run keep their
last example. Every captured text is real output: a path of this machine in it is shortened to
``…/`` (and the page says so), and a capture that still names one is refused.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RULES_DIR = ROOT / "docs" / "rules"
BENCHMARKS = ROOT / "docs" / "BENCHMARKS.md"  # its table of measured fixes, quoted by the pages
README = ROOT / "README.md"
# The files that show the demo's whole report, between DEMO_BEGIN and DEMO_END.
DEMO_PAGES = (README, ROOT / "docs" / "guide" / "run.md")
# Whole outputs of the excerpts' runs, shown in a guide: (excerpt name, page, marker name)
WHOLE = (("attach", ROOT / "docs" / "guide" / "attach.md", "attach-report"),)
EXAMPLES_PY = ROOT / "trainprof" / "render" / "rule_examples.py"
MEASURED_PY = ROOT / "trainprof" / "render" / "measured_fixes.py"
DEMO_BEGIN, DEMO_END = "<!-- demo:begin -->", "<!-- demo:end -->"
SHORTENED = "the paths of the machine that ran it, to `…/`"
COLUMNS = 90  # the width of every captured report: no line of the docs wider than that


def write_pages() -> list[str]:
    """Write docs/rules/ from the registry; remove pages of rules that no longer exist."""
    from trainprof.analysis.rules import all_rules
    from trainprof.render.rules_reference import pages

    RULES_DIR.mkdir(parents=True, exist_ok=True)
    write_measured()
    wanted = pages(all_rules())
    changed = []
    for name, text in wanted.items():
        path = RULES_DIR / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(name)
    for path in RULES_DIR.glob("*.md"):
        if path.name not in wanted:
            path.unlink()
            changed.append(f"{path.name} (removed)")
    return changed


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    bindir = str(Path(sys.executable).parent)  # torchrun beside this Python
    env.update(COLUMNS=str(COLUMNS), NO_COLOR="1", PATH=bindir + os.pathsep + env.get("PATH", ""))
    return env


def _machine() -> str:
    """Where a capture ran, in the words the docs use (CPUs, torch)."""
    probe = "import torch; print(torch.__version__)"
    torch = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False
    ).stdout.strip()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{cpus} CPUs, {platform.system()}, Python {platform.python_version()}, torch {torch}"


def _run_copy(script: Path, args: list[str], timeout: float) -> tuple[str, str]:
    """Run ``trainprof run ARGS`` on a copy of script in a fresh folder: (its output, folder)."""
    with tempfile.TemporaryDirectory(prefix="trainprof-docs-") as tmp:
        shutil.copy(script, tmp)
        cmd = [sys.executable, "-m", "trainprof", "run", *args]
        proc = subprocess.run(
            cmd,
            cwd=tmp,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
            check=False,
        )
        return proc.stdout, tmp


def _shorten(text: str, folder: str) -> tuple[str, bool]:
    """Paths of this machine (the run's folder, the checkout, the temporary folder, the home)
    as ``…/rest``, a box's right border kept in place: (the text, whether any was shortened)."""
    roots = {folder, str(ROOT), tempfile.gettempdir(), str(Path.home())}
    pattern = "|".join(re.escape(r.rstrip(os.sep)) for r in sorted(roots, key=len, reverse=True))
    lines, short = [], False
    for line in text.splitlines():
        new = re.sub(rf"(?:{pattern}){re.escape(os.sep)}", "…/", line)
        if new != line:
            short = True
            if line.endswith("│"):
                new = new[:-1].rstrip().ljust(len(line) - 1) + "│"
        lines.append(new)
    return "\n".join(lines), short


def _leaks(text: str, folder: str) -> bool:
    paths = (folder, str(ROOT), str(Path.home()), tempfile.gettempdir() + os.sep)
    return any(p in text for p in paths)


def write_readme_demo() -> None:
    """Run the shipped demo script and put its whole output between the markers of the README
    and the run guide."""
    script = ROOT / "trainprof" / "examples" / "demo_train.py"
    load = os.getloadavg()[0]  # other work on the machine shows in the report (cpu-starved)
    out, folder = _run_copy(script, [script.name], 300)
    out, shortened = _shorten(out, folder)
    if _leaks(out, folder):
        sys.exit("tools.docs: the demo's output names a path of this machine; README unchanged")
    date = datetime.date.today().isoformat()
    note = f" Shortened: {SHORTENED}." if shortened else ""
    intro = textwrap.fill(
        f"`trainprof run demo_train.py` (what `make demo` runs), captured by `make docs` on "
        f"{date} ({_machine()}; load average {load:.1f} before it).{note}",
        width=96,
        break_on_hyphens=False,
    )
    block = f"{DEMO_BEGIN}\n{intro}\n\n```\n{out.rstrip()}\n```\n{DEMO_END}"
    for page in DEMO_PAGES:
        text = page.read_text(encoding="utf-8")
        if text.count(DEMO_BEGIN) != 1 or text.count(DEMO_END) != 1:
            sys.exit(f"tools.docs: {page.relative_to(ROOT)} needs one {DEMO_BEGIN} … {DEMO_END}")
        head, rest = text.split(DEMO_BEGIN, 1)
        tail = rest.split(DEMO_END, 1)[1]
        page.write_text(head + block + tail, encoding="utf-8")


# ---- the README's short excerpts: each a few lines of a real run, picked by pattern ---------

ZOO = ROOT / "trainprof" / "examples" / "zoo"
# name → the lines to keep: (a pattern of the first line, how many lines from it)
PICKS: dict[str, tuple[tuple[str, int], ...]] = {
    "attach": ((r"^│ 1\. \[error\]", 2), (r"^│\s+where: ", 1)),
    "report": ((r"^trace: ", 1), (r"^HTML report: ", 1)),
    "ci": ((r"^ findings ", 1), (r"^ max-data-wait ", 1), (r"^trainprof ci: exit", 1)),
    "compare": ((r"^verdict: ", 1), (r"^settings that differ:", 1), (r"^  batch size: ", 1)),
    "doctor": ((r"^ cpu ", 1), (r"^\d+ ok, \d+ warn, \d+ fail", 1)),
}


def _trainprof(folder: Path, *args: str, timeout: float = 300) -> str:
    cmd = [sys.executable, "-m", "trainprof", *args]
    proc = subprocess.run(
        cmd,
        cwd=folder,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        check=False,
    )
    return proc.stdout


def _attach_hung(folder: Path) -> str:
    """The zoo's hang_worker_blocked.py, started plainly, attached once its log says it hung."""
    shutil.copy(ZOO / "hang_worker_blocked.py", folder)
    job = subprocess.Popen(
        [sys.executable, "hang_worker_blocked.py"],
        cwd=folder,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        assert job.stdout is not None
        for line in job.stdout:  # its last line before its workers block for good
            if "step 20:" in line:
                break
        return _trainprof(folder, "attach", str(job.pid), "--duration", "10")
    finally:
        os.killpg(job.pid, 9)
        job.wait()


def _excerpt_outputs(folder: Path) -> dict[str, str]:
    """Each excerpt's whole output, from real runs in folder."""
    for name in ("cpu_stall.py", "input_bound.py", "ci_smoke.py"):
        shutil.copy(ZOO / name, folder)
    out = {"attach": _attach_hung(folder)}
    out["report"] = _trainprof(
        folder, "run", "-q", "--trace", "cpu-stall.trace.json", "--html", "cpu-stall.html",
        "cpu_stall.py",
    )  # fmt: skip
    out["ci"] = _trainprof(
        folder, "ci", "-q", "--steps", "40", "--max-data-wait", "0.2", "--fail-on", "warning",
        "input_bound.py",
    )  # fmt: skip
    for size in ("4", "16"):
        _trainprof(folder, "run", "-q", "--run-dir", f"runs/bs{size}", "ci_smoke.py",
                   "--batch-size", size)  # fmt: skip
    out["compare"] = _trainprof(folder, "compare", "runs/bs4", "runs/bs16")
    out["doctor"] = _trainprof(folder, "doctor")
    return out


def pick(output: str, name: str) -> str:
    """The excerpt's lines of output; a pattern that finds nothing stops `make docs`."""
    lines = output.splitlines()
    kept: list[str] = []
    for pattern, count in PICKS[name]:
        at = next((i for i, line in enumerate(lines) if re.search(pattern, line)), None)
        if at is None:
            sys.exit(f"tools.docs: the {name} excerpt: no line matches {pattern!r}:\n{output}")
        kept += [line.rstrip() for line in lines[at : at + count]]
    return "\n".join(kept)


def write_readme_excerpts() -> None:
    """Run each excerpt's commands for real; put its lines between its README markers, and a
    guide's whole output between the guide's."""
    text = README.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="trainprof-docs-") as tmp:
        outputs = _excerpt_outputs(Path(tmp))
        for name in PICKS:
            text = _put(text, name, pick(outputs[name], name), tmp, README)
        for name, page, marker in WHOLE:
            whole = "\n".join(line.rstrip() for line in outputs[name].strip().splitlines())
            page.write_text(_put(page.read_text(encoding="utf-8"), marker, whole, tmp, page))
    README.write_text(text, encoding="utf-8")


def _put(text: str, marker: str, excerpt: str, folder: str, page: Path) -> str:
    """text with excerpt, shortened, as the only block between its ``marker`` comments."""
    excerpt, _ = _shorten(excerpt, folder)
    if _leaks(excerpt, folder):
        sys.exit(f"tools.docs: the {marker} excerpt names a path of this machine")
    begin, end = f"<!-- {marker}:begin -->", f"<!-- {marker}:end -->"
    if text.count(begin) != 1 or text.count(end) != 1:
        sys.exit(f"tools.docs: {page.relative_to(ROOT)} needs one {begin} … {end}")
    head, rest = text.split(begin, 1)
    return f"{head}{begin}\n```\n{excerpt}\n```\n{end}{rest.split(end, 1)[1]}"


# ---- example findings -----------------------------------------------------------------------


def finding_text(report: str, rule_id: str) -> str | None:
    """The findings panel cut to the one finding of rule_id: its top, that item, its bottom."""
    lines = report.splitlines()
    top = next((i for i, line in enumerate(lines) if line.startswith("╭─ findings")), None)
    if top is None:
        return None
    end = next((i for i in range(top + 1, len(lines)) if lines[i].startswith("╰")), None)
    if end is None:
        return None
    starts = [i for i in range(top + 1, end) if re.match(r"│ *\d+\. \[", lines[i])]
    for k, start in enumerate(starts):
        stop = starts[k + 1] if k + 1 < len(starts) else end
        item = lines[start:stop]
        joined = " ".join(line.strip("│ ") for line in item)
        if re.search(rf"\({re.escape(rule_id)}[,)]", joined):
            return "\n".join([lines[top], *item, lines[end]])
    return None


def _zoo_args(case_name: str, kind: str, timeout: float) -> list[str]:
    base = ["-q", "--timeout", f"{timeout:g}"]
    if kind == "hang":
        base += ["--hang-after", "4"]
    if kind == "dist":
        return [*base, "--", "torchrun", "--nproc-per-node", "2", f"{case_name}.py"]
    return [*base, f"{case_name}.py"]


def capture_examples(only: list[str]) -> dict[str, dict[str, str]]:
    from trainprof.analysis.rules import all_rules
    from trainprof.examples.zoo import ZOO, script_path
    from trainprof.render.rule_examples import EXAMPLES

    examples = dict(EXAMPLES)
    machine = _machine()
    date = datetime.date.today().isoformat()
    has_gpu = shutil.which("nvidia-smi") is not None
    for r in all_rules():
        if only and r.id not in only:
            continue
        cases = [c for c in ZOO.values() if c.expect == r.id and (has_gpu or c.kind != "gpu")]
        for case in cases:
            args = _zoo_args(case.name, case.kind, case.timeout_s)
            print(f"tools.docs: {r.id}: trainprof run {' '.join(args)}", file=sys.stderr)
            try:
                out, folder = _run_copy(script_path(case.name), args, case.timeout_s + 120)
            except subprocess.TimeoutExpired:
                print(f"tools.docs: {r.id}: {case.name} not kept (timed out)", file=sys.stderr)
                continue
            text = finding_text(out, r.id)
            shortened = False
            if text is not None:
                text, shortened = _shorten(text, folder)
            if text is None or _leaks(text, folder):
                why = "no such finding" if text is None else "it names a path of this machine"
                print(f"tools.docs: {r.id}: {case.name} not kept ({why})", file=sys.stderr)
                continue
            command = "trainprof run " + " ".join(args)
            examples[r.id] = dict(
                case=case.name, command=command, date=date, machine=machine, text=text
            )
            if shortened:
                examples[r.id]["shortened"] = SHORTENED
            break
    return examples


def write_measured() -> None:
    """trainprof/render/measured_fixes.py from BENCHMARKS.md's table of what tune measured."""
    from trainprof.render import measured_fixes
    from trainprof.render.rules_reference import measured_rows

    rows = measured_rows(BENCHMARKS.read_text(encoding="utf-8"))
    if tuple(rows) == measured_fixes.MEASURED:
        return
    head = MEASURED_PY.read_text(encoding="utf-8").split("MEASURED:", 1)[0]
    body = json.dumps(rows, indent=4, ensure_ascii=False)
    MEASURED_PY.write_text(f"{head}MEASURED: tuple[str, ...] = tuple({body})\n", "utf-8")
    _format(MEASURED_PY)
    importlib.reload(measured_fixes)


def write_examples(examples: dict[str, dict[str, str]]) -> None:
    head = EXAMPLES_PY.read_text(encoding="utf-8").split("EXAMPLES:", 1)[0]
    body = json.dumps(dict(sorted(examples.items())), indent=4, ensure_ascii=False)
    EXAMPLES_PY.write_text(f"{head}EXAMPLES: dict[str, dict[str, str]] = {body}\n", "utf-8")
    _format(EXAMPLES_PY)


def _format(path: Path) -> None:
    ruff = Path(sys.executable).parent / "ruff"
    if ruff.exists():
        subprocess.run([str(ruff), "format", "-q", str(path)], check=False)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tools.docs", description=__doc__)
    parser.add_argument("--pages", action="store_true", help="the rule pages only")
    parser.add_argument("--examples", nargs="*", metavar="ID", help="run the zoo for examples")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.examples is not None:
        write_examples(capture_examples(args.examples))
        # the pages read the examples at import: write them in a fresh interpreter
        subprocess.run([sys.executable, "-m", "tools.docs", "--pages"], cwd=ROOT, check=True)
        return
    changed = write_pages()
    print(f"tools.docs: {len(changed)} rule pages written", file=sys.stderr)
    if not args.pages:
        write_readme_demo()
        write_readme_excerpts()
        print("tools.docs: README.md's demo report and excerpts captured again", file=sys.stderr)


if __name__ == "__main__":
    main()
