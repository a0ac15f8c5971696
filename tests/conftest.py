"""Shared helpers: run trainprof for real, as a subprocess, and read what it stored."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent
# The suite's environment as an activated one: `trainprof run train.py` runs a script with the
# python on PATH, which must be this one (it has torch), however pytest was started.
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
# A job script that imports a helper from this folder (stand_in_timeline) runs with this env
JOB_HELPERS_ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent)}


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str
    run_dir: Path
    report: dict[str, Any] | None

    @property
    def finding_ids(self) -> list[str]:
        return [f["id"] for f in (self.report or {}).get("findings", [])]

    @property
    def problems(self) -> list[str]:
        """Ids of warning/error findings, most harmful first."""
        return [f["id"] for f in (self.report or {}).get("findings", []) if f["severity"] != "info"]


def repeated(script: Path, times: int = 3) -> list[str]:
    """The command that runs an unmodified script ``times`` times in one process, so it lives
    long enough to attach to."""
    body = "import runpy, sys\nfor _ in range(int(sys.argv[2])):\n    runpy.run_path(sys.argv[1], run_name='__main__')"
    return [sys.executable, "-c", body, str(script), str(times)]


def trainprof_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "trainprof", *args]


def run_trainprof(
    tmp: Path,
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    run_args: tuple[str, ...] = (),
) -> Result:
    """`trainprof run --quiet --run-dir ... --json ... [run_args] args...`, for real."""
    run_dir = tmp / f"run{len(list(tmp.glob('run*')))}"
    json_path = run_dir.with_suffix(".json")
    cmd = trainprof_cmd(
        "run", "--quiet", "--run-dir", str(run_dir), "--json", str(json_path), *run_args, *args
    )
    proc = subprocess.run(
        cmd, cwd=cwd or tmp, env=env, capture_output=True, text=True, timeout=timeout
    )
    report = json.loads(json_path.read_text()) if json_path.is_file() else None
    return Result(proc.returncode, proc.stdout, proc.stderr, run_dir, report)


# ---- runs shared by several test modules: each job runs once a session --------------------

# Zoo cases whose run also writes the trace and the HTML report (test_trace_html reads them)
ZOO_VIEWS = {"cpu_stall"}
ZooRun = Callable[[str], Result]  # zoo_run's value: the run of the zoo case of that name


@pytest.fixture(scope="session")
def zoo_run(tmp_path_factory: pytest.TempPathFactory) -> ZooRun:
    """`trainprof run` of a zoo script as test_zoo judges it, run once a session and read by
    every module that needs that run (test_zoo, test_trace_html, test_stability). A hung case
    gets ``--hang-after 4``: its state holds still, and 4 s of silence tell it as well as the
    default 10. A case in ZOO_VIEWS also writes ``views/trace.json`` and ``views/report.html``
    (relative to the run's working directory, the path the report prints)."""
    from trainprof.examples.zoo import ZOO, script_path

    tmp = tmp_path_factory.mktemp("zoo")
    cache: dict[str, Result] = {}

    def get(name: str) -> Result:
        if name not in cache:
            case = ZOO[name]
            hang_after = ("--hang-after", "4") if case.kind == "hang" else ()
            views = (
                ("--trace", str(tmp / "views" / "trace.json"))
                + ("--html", str(tmp / "views" / "report.html"))
                if name in ZOO_VIEWS
                else ()
            )
            cache[name] = run_trainprof(
                tmp,
                str(script_path(name)),
                run_args=("--timeout", str(case.timeout_s), *hang_after, *views),
                timeout=case.timeout_s + 60,
            )
        return cache[name]

    return get


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    """`trainprof demo --run-dir DIR`, run once a session (test_run_torch, test_hardening_cli):
    the completed process; its run directory is ``demo_run.args[-1]``."""
    run_dir = tmp_path_factory.mktemp("demo") / "demo"
    return subprocess.run(
        trainprof_cmd("demo", "--run-dir", str(run_dir)),
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.fixture
def reaped() -> Iterator[Callable[[subprocess.Popen[str]], subprocess.Popen[str]]]:
    """Wraps a started trainprof so that a failing test does not leave it running: killed at
    teardown if still alive (its watchdog then stops the job)."""
    procs: list[subprocess.Popen[str]] = []

    def keep(proc: subprocess.Popen[str]) -> subprocess.Popen[str]:
        procs.append(proc)
        return proc

    yield keep
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def as_a_terminal_job() -> None:
    """``preexec_fn`` for a process a test sends Ctrl-C: SIGINT and SIGHUP as a terminal's
    foreground job has them. A shell that runs pytest in the background (CI scripts) has them
    ignored, and trainprof, like the job without it, keeps an ignored signal ignored."""
    for s in (signal.SIGINT, signal.SIGHUP):
        signal.signal(s, signal.SIG_DFL)


def write_script(directory: Path, name: str, body: str) -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(body))
    return path


def run_reporting_job(
    tmp: Path, name: str, body: str, *args: str, timeout: float = 120
) -> tuple[Result, Any]:
    """A job script that writes what it saw inside the probe, as JSON, to the file its first
    argument names (``args`` follow), run under `trainprof run --no-stacks` with this folder's
    helpers importable (``JOB_HELPERS_ENV``): the run, and what the job wrote."""
    script = write_script(tmp, name, body)
    out = script.with_suffix(".json")
    r = run_trainprof(
        tmp, "--no-stacks", str(script), str(out), *args, timeout=timeout, env=JOB_HELPERS_ENV
    )
    assert r.returncode == 0, r.stderr
    return r, json.loads(out.read_text())


@pytest.fixture
def clean_env() -> dict[str, str]:
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("TRAINPROF_"):
            del env[k]
    return env


def live_group_members(pgid: int) -> list[int]:
    """Processes of a process group that are still running (zombies awaiting init don't count)."""
    members = []
    for p in psutil.process_iter(["status"]):
        try:
            if os.getpgid(p.pid) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE:
                members.append(p.pid)
        except (ProcessLookupError, psutil.Error):
            continue
    return members


# ---- the fast lane (`make test-fast`: -m "not slow") ---------------------------------------

# Folders whose tests run real training jobs (or need a GPU or a browser): slow, every one.
SLOW_DIRS = ("integration", "gpu", "browser")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks every test under SLOW_DIRS `slow`, so the fast lane leaves them out by marker (a new
    test there is slow without saying so)."""
    tests = Path(__file__).resolve().parent
    slow = [tests / d for d in SLOW_DIRS]
    for item in items:
        if any(item.path.is_relative_to(d) for d in slow):
            item.add_marker(pytest.mark.slow)


def assert_rules_ran(report: Any) -> None:
    """A report that finds no problem must have judged the run: fails when the step rules were
    skipped (too few steps, no probe). ``report`` is a report dict (`--json`) or a Verdict.

    The step rules are those that need nothing but the steps (cpu-stall, checkpoint-stall,
    eval-stall); for a report of `trainprof attach`, which times no step, those it judges
    from stack samples instead."""
    from trainprof.analysis.rules import all_rules

    if isinstance(report, dict):
        skipped = {s["id"]: s["reason"] for s in report.get("skipped") or []}
        attach = (report.get("run") or {}).get("attach") is not None
    else:
        skipped = {s.id: s.reason for s in report.skipped}
        attach = False
    rules = all_rules()
    if attach:
        judged = {r.id for r in rules if "stacks" in getattr(r, "or_from", ())}
    else:
        judged = {r.id for r in rules if r.needs == ("steps",)}
    assert judged, "no step rule is registered: the check would pass on anything"
    not_run = sorted(judged & skipped.keys())
    assert not not_run, "the rules did not judge this run: " + "; ".join(
        f"{i} skipped ({skipped[i]})" for i in not_run
    )
