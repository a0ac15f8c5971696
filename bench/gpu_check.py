"""``make gpu-check`` = ``PYTHONPATH=. python3 -m bench.gpu_check``: everything a lent GPU
session runs, in one command, within a wall budget (default 480 s: all GPU checks in at most
8 minutes, leaving a lent session's 15 minutes room for the machine's start and a second
call). No venv: the GPU machine has the packages; what it lacks (py-spy, pytest,
pytest-timeout) comes from wheels carried in ``.wheels/``.

Phases, each with its own budget (what does not fit is said to be skipped):

1. setup: the machine (torch, CUDA, card); py-spy and pytest from ``.wheels/*.whl`` when
   missing (``pip install --no-index --target .pyspy``, else the wheels are unzipped), then
   ``.pyspy/bin`` on PATH and the repository on an absolute PYTHONPATH; whether py-spy may
   attach to a process here.
2. tests: ``python3 -m pytest -q <tests/gpu files> -x --timeout 300`` (the zoo first;
   ``--keep-going`` drops ``-x``; ``--only`` names the tests to run instead), output in
   ``$OUT/pytest.txt``; the reports, console texts and measurements the tests keep in
   ``$OUT/artifacts.tgz`` (the device tool brings back at most 8 files). pytest is told to
   stop starting tests once its budget is near (``--session-timeout``), so it prints its own
   summary; where a long test still runs past the budget it is stopped, and the failures so
   far come from ``bench/gpu_failures.py``, which writes each one down as it happens.
3. overhead: ``bench/gpu_loop.py`` calibrated to ≈1000 (or as fast as the host goes) and
   ≈100 steps/s; one run of ``gpu_loop.py --toggle`` under ``trainprof run`` (trainprof's cost
   inside one process, on the device's clock: the hooks off against an A/A control, and with
   ``--toggle-outside`` trainprof's outside processes stopped too; ``--skip-toggle`` leaves
   it out, for more rounds); a second toggle at the fast size with each hook part alone and
   its wrappers empty (``--toggle-by-part-s``), and ``bench.micro`` under ``trainprof run``
   (each hook per call, a clock read, an empty wrapper); then rounds of
   plain / ``trainprof run`` / probe's device timeline off / ``--no-stacks`` (``--variants``
   adds no USS reads and samplers idle, ``--interval 3600``), each round in the reverse order
   of the one before (A B … B A); every run times itself on the device's
   clock (CUDA events). Ratio to plain in the same round: median and min–max over rounds.
4. summary: a Markdown report on stdout and in ``$OUT/gpu-check.md`` (and
   ``$OUT/gpu-check.json``), then one JSON line, the last line of output.

``--device cpu`` tries the whole harness on a machine without a GPU (the tests skip).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import stats
from bench.overhead import (
    DISABLE_ENV,
    OverheadResult,
    RunResult,
    Variant,
    last_json,
    ratio_rows,
    summarize,
)

ROOT = Path(__file__).resolve().parent.parent
GPU_LOOP = ROOT / "bench" / "gpu_loop.py"
WHEELS = ROOT / ".wheels"
TARGET = ROOT / ".pyspy"
# The short files before test_device_timeline.py, whose no-sync test (~90 s) comes last: where
# the budget runs out, the tests not started are the fewest.
FIRST_TESTS = (
    "test_gpu_zoo.py",
    "test_gpu_real.py",
    "test_cuda_graphs.py",
    # Before the device timeline's long no-sync test (~90 s, last): in the 2026-11-28 run the
    # tests' budget ran out there, and the attach tests after it never started.
    "test_gpu_attach.py",
    "test_device_timeline.py",
)
# Issue 15's overhead bounds on the whole process: ≤ 3 % at ≈ 1000 steps/s, ≤ 1 % at ≈ 100.
TARGET_PERCENT = {1000.0: 3.0, 100.0: 1.0}
TARGET_RATES = tuple(TARGET_PERCENT)  # the loop sizes calibrated to these rates

VARIANTS: tuple[Variant, ...] = (
    Variant("plain", "plain", "python bench/gpu_loop.py, nothing attached", "plain"),
    Variant(
        "trainprof",
        "trainprof (default)",
        "trainprof run --quiet: probe with the device timeline, host/GPU samplers, py-spy",
        "trainprof",
    ),
    Variant(
        "device-off",
        "probe: device timeline off",
        "TRAINPROF_PROBE_DISABLE=device: no CUDA events, no backward/optimizer marks",
        "trainprof",
        disable="device",
    ),
    Variant(
        "no-stacks",
        "trainprof --no-stacks",
        "probe with the device timeline and samplers, no py-spy",
        "trainprof",
        flags=("--no-stacks",),
    ),
    Variant(
        "no-uss",
        "samplers: no USS",
        "TRAINPROF_PROBE_DISABLE=uss: psutil does not read /proc/PID/smaps_rollup (memory-map lock)",
        "trainprof",
        disable="uss",
    ),
    Variant(
        "samplers-idle",
        "trainprof --interval 3600",
        "probe and py-spy as default; psutil and NVML sample once (at start) instead of every 0.5 s",
        "trainprof",
        flags=("--interval", "3600"),
    ),
)


# The rounds' default: fewer variants, more rounds (plain alone scattered ±14 % on the H200
# machine). The toggle attributes inside one process; no-uss and samplers-idle on request.
DEFAULT_VARIANTS = ("plain", "trainprof", "device-off", "no-stacks")


def log(msg: str) -> None:
    print(msg, flush=True)


@dataclass
class Check:
    started: float = field(default_factory=time.monotonic)
    budget_s: float = 450.0
    out: Path | None = None
    work: Path = ROOT
    env: dict[str, str] = field(default_factory=dict)
    machine: dict[str, Any] = field(default_factory=dict)
    setup: dict[str, Any] = field(default_factory=dict)
    tests: dict[str, Any] = field(default_factory=dict)
    overhead: dict[str, Any] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    markdown: list[str] = field(default_factory=list)

    def left(self) -> float:
        return self.budget_s - (time.monotonic() - self.started)

    def skip(self, what: str) -> None:
        self.skipped.append(what)
        log(f"SKIPPED: {what}")


# ---------------------------------------------------------------- setup


def base_env() -> dict[str, str]:
    """This environment without TRAINPROF_ variables, the repository first on an absolute
    PYTHONPATH (the jobs run in temporary directories), .pyspy/bin on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINPROF_")}
    paths = [str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if _python_in_target():  # pytest (or a plugin) came from the carried wheels
        paths.append(str(TARGET))
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(str(Path(p).resolve()) for p in paths))
    env["PATH"] = f"{TARGET / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def _python_in_target() -> bool:
    if not TARGET.is_dir():
        return False
    return any(
        p.name.endswith(".dist-info") and not p.name.startswith("py_spy") for p in TARGET.iterdir()
    )


def importable(name: str, env: dict[str, str]) -> bool:
    """Whether the interpreter imports ``name`` with this environment (.pyspy included)."""
    code = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({name!r}) is None)"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True)
    return proc.returncode == 0


def py_spy(env: dict[str, str]) -> str | None:
    here = Path(sys.executable).parent / "py-spy"
    return str(here) if here.is_file() else shutil.which("py-spy", path=env.get("PATH"))


def machine_info(env: dict[str, str], device: str) -> dict[str, Any]:
    code = (
        "import json, platform, torch\n"
        "d = {'python': platform.python_version(), 'torch': torch.__version__, "
        "'cuda': torch.version.cuda, 'cuda_available': torch.cuda.is_available()}\n"
        "if d['cuda_available']:\n"
        "    d['card'] = torch.cuda.get_device_name(0)\n"
        "    d['capability'] = list(torch.cuda.get_device_capability(0))\n"
        "    d['devices'] = torch.cuda.device_count()\n"
        "    d['memory_gib'] = round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)\n"
        "print(json.dumps(d))\n"
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
        )
        info = last_json(proc.stdout) or {"error": proc.stderr.strip()[-500:]}
    except (OSError, subprocess.TimeoutExpired) as exc:
        info = {"error": f"{type(exc).__name__}: {exc}"}
    info["cpus"] = os.cpu_count()
    if device == "cpu":
        info["card"] = "cpu (harness trial)"
    return info


def unzip_wheel(wheel: Path, target: Path) -> None:
    """Install a wheel without pip: purelib/platlib to the target, scripts to target/bin."""
    with zipfile.ZipFile(wheel) as z:
        for member in z.infolist():
            if member.is_dir():
                continue
            parts = member.filename.split("/")
            if len(parts) >= 3 and parts[0].endswith(".data"):
                if parts[1] == "scripts":
                    dest = target / "bin" / "/".join(parts[2:])
                else:  # purelib, platlib
                    dest = target / "/".join(parts[2:])
            else:
                dest = target / member.filename
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(z.read(member))
            if dest.parent.name == "bin":
                dest.chmod(dest.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def pip_install(args: list[str]) -> tuple[bool, str]:
    cmd = [sys.executable, "-m", "pip", "install", "--no-index", "--target", str(TARGET)]
    cmd += ["--disable-pip-version-check", "--no-warn-script-location", "--quiet", *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{type(exc).__name__}: {exc}"
    return proc.returncode == 0, (proc.stderr or proc.stdout).strip()[-500:]


def install_missing(env: dict[str, str]) -> dict[str, Any]:
    """py-spy, pytest and pytest-timeout from .wheels/ when this machine lacks them."""
    done: dict[str, Any] = {}
    wheels = sorted(WHEELS.glob("*.whl")) if WHEELS.is_dir() else []
    spy_wheels = [w for w in wheels if w.name.startswith("py_spy-")]
    if py_spy(env) is None and spy_wheels:
        # pip picks the wheel for this platform (x86_64 and aarch64 ones may both be carried)
        ok, msg = pip_install(["--find-links", str(WHEELS), "py-spy"])
        if not ok:
            mine = [w for w in spy_wheels if platform.machine() in w.name] or spy_wheels
            log(f"pip could not install py-spy ({msg}); unzipping {mine[-1].name} instead")
            unzip_wheel(mine[-1], TARGET)
        done["py-spy"] = "installed from .wheels" + ("" if ok else " (unzipped)")
    needed = [name for name in ("pytest", "pytest_timeout") if not importable(name, env)]
    if needed and wheels:
        ok, msg = pip_install(["--find-links", str(WHEELS), *(n.replace("_", "-") for n in needed)])
        if not ok:
            log(f"pip could not install {needed} ({msg}); unzipping the pure-Python wheels")
            for w in wheels:
                if w.name.endswith("-none-any.whl"):
                    unzip_wheel(w, TARGET)
        done["python"] = f"{', '.join(needed)} installed into .pyspy from .wheels"
    elif needed:
        done["python"] = f"missing and no wheels: {', '.join(needed)}"
    return done


def py_spy_works(spy: str) -> str:
    """'ok', or why py-spy cannot read a process here (ptrace permissions, in containers)."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(20)"])
    try:
        time.sleep(0.5)
        proc = subprocess.run(
            [spy, "dump", "--nonblocking", "--pid", str(sleeper.pid)],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if proc.returncode == 0:
            return "ok"
        return (proc.stderr or proc.stdout).strip()[-300:] or f"exit {proc.returncode}"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        sleeper.kill()
        sleeper.wait()


def phase_setup(c: Check, device: str) -> None:
    log("== setup")
    t0 = time.monotonic()
    c.env = base_env()
    c.setup["installed"] = install_missing(c.env)
    c.env = base_env()  # .pyspy may exist now
    for k, v in c.setup["installed"].items():
        log(f"  {k}: {v}")
    spy = py_spy(c.env)
    c.setup["py_spy"] = spy
    if spy:
        version = subprocess.run([spy, "--version"], capture_output=True, text=True).stdout
        c.setup["py_spy_version"] = version.strip()
        c.setup["py_spy_attach"] = py_spy_works(spy)
    else:
        c.setup["py_spy_attach"] = "py-spy not found (stack-based rules are skipped)"
    c.setup["pytest"] = importable("pytest", c.env)
    c.setup["pytest_timeout"] = importable("pytest_timeout", c.env)
    c.machine = machine_info(c.env, device)
    c.setup["seconds"] = round(time.monotonic() - t0, 1)
    log(f"  machine: {json.dumps(c.machine)}")
    log(f"  py-spy: {spy or 'missing'} ({c.setup['py_spy_attach']})")
    log(f"  pytest: {c.setup['pytest']}, pytest-timeout: {c.setup['pytest_timeout']}")


# ---------------------------------------------------------------- tests


def test_files(only: str = "") -> list[str]:
    """The GPU tests to run: ``only``'s comma-separated node ids or files, else every file in
    tests/gpu (``FIRST_TESTS`` first)."""
    if only:
        return [t.strip() for t in only.split(",") if t.strip()]
    folder = ROOT / "tests" / "gpu"
    names = [n for n in FIRST_TESTS if (folder / n).is_file()]
    names += sorted(p.name for p in folder.glob("test_*.py") if p.name not in names)
    return [str(Path("tests") / "gpu" / n) for n in names]


def kill_group(proc: subprocess.Popen[Any]) -> None:
    """Stop a process this script started, and its children (its own process group)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            continue


def junit_summary(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        return None
    cases = root.iter("testcase")
    out: dict[str, Any] = {"passed": 0, "failed": [], "skipped": [], "durations": {}}
    for case in cases:
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        out["durations"][name] = round(float(case.get("time") or 0.0), 1)
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        skip = case.find("skipped")
        if bad is not None:
            out["failed"].append({"test": name, "message": (bad.get("message") or "")[:400]})
        elif skip is not None:
            out["skipped"].append({"test": name, "reason": (skip.get("message") or "")[:300]})
        else:
            out["passed"] += 1
    return out


# A test started this close to the budget might not end before it: pytest starts none then
# (a quarter of a smaller budget).
SESSION_MARGIN_S = 45.0
SESSION_TIMEOUT_SAYS = "session-timeout:"  # pytest-timeout's line when it stopped the session


def phase_tests(
    c: Check, budget_s: float, keep_going: bool, per_test_s: int, only: str = ""
) -> None:
    log(f"== tests (budget {budget_s:.0f} s)")
    if not c.setup.get("pytest"):
        c.skip("tests: pytest is not installed and no wheel for it was carried in .wheels/")
        return
    if budget_s < 30:
        c.skip(f"tests: only {budget_s:.0f} s left")
        return
    art = c.work / "reports"
    meas = c.work / "measurements.jsonl"
    junit = c.work / "gpu-junit.xml"
    text = c.work / "pytest.txt"
    failures = c.work / "failures.txt"
    cmd = [sys.executable, "-m", "pytest", "-q", "-rfEs", "-p", "no:cacheprovider"]
    cmd += ["-p", "bench.gpu_failures"]
    cmd += [*test_files(only), "--junitxml", str(junit), "--durations", "15"]
    if not keep_going:
        cmd.append("-x")
    if c.setup.get("pytest_timeout"):
        cmd += ["--timeout", str(per_test_s)]
        margin = min(SESSION_MARGIN_S, budget_s / 4)
        cmd += ["--session-timeout", str(int(max(10.0, budget_s - margin)))]
    env = dict(
        c.env,
        GPU_CHECK_ARTIFACTS=str(art),
        GPU_CHECK_MEASUREMENTS=str(meas),
        GPU_CHECK_FAILURES=str(failures),
    )
    log("  " + " ".join(cmd[1:]))
    t0 = time.monotonic()
    with open(text, "w") as f:
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            rc: int | None = proc.wait(timeout=budget_s)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            rc = None
    wall = time.monotonic() - t0
    if rc is None and failures.is_file():
        with open(text, "a") as f:  # pytest was stopped before its own summary
            f.write("\n\n(stopped at the budget; the failures so far:)\n")
            f.write(failures.read_text(errors="replace"))
    output = text.read_text(errors="replace")
    log(output[-6000:])
    c.tests = {"rc": rc, "seconds": round(wall, 1), "command": " ".join(cmd[1:])}
    summary = junit_summary(junit)
    if summary:
        c.tests.update(summary)
    if rc is None:
        c.skip(
            f"tests: stopped at the budget ({budget_s:.0f} s); the rest of tests/gpu did not run"
        )
        c.tests["progress"] = output.strip().splitlines()[-1:] if output.strip() else []
    elif SESSION_TIMEOUT_SAYS in output:
        # pytest exits 1 once a test ends past the session timeout, failed or not: what failed
        # is in the junit summary; the tests after it did not start.
        c.tests["rc"] = None
        c.skip(
            "tests: pytest's session timeout came (its budget less a margin): any test after "
            "it did not start"
        )
    if meas.is_file():
        c.tests["measurements"] = [
            json.loads(line) for line in meas.read_text().splitlines() if line.strip()
        ]


# ---------------------------------------------------------------- overhead


def run_loop(
    c: Check, v: Variant, loop_args: list[str], run_dir: Path, rnd: int, timeout: float
) -> RunResult:
    job = [sys.executable, str(GPU_LOOP), *loop_args]
    if v.kind == "plain":
        cmd = job
    else:
        cmd = [sys.executable, "-m", "trainprof", "run", "--quiet", "--run-dir", str(run_dir)]
        cmd += [*v.flags, str(GPU_LOOP), *loop_args]
    env = dict(c.env)
    if v.disable:
        env[DISABLE_ENV] = v.disable
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            cmd,
            env=env,
            cwd=run_dir.parent,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return RunResult(v.key, rnd, None, time.monotonic() - t0, f"{type(exc).__name__}: {exc}")
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    wall = time.monotonic() - t0
    out = last_json(proc.stdout)
    if proc.returncode != 0 or out is None or "rates" not in out:
        text = (proc.stderr or proc.stdout).strip()
        tail = (text.splitlines() or ["no output"])[-1]
        return RunResult(
            v.key, rnd, None, wall, f"exit {proc.returncode}: {tail[:200]}", detail=text[-3000:]
        )
    return RunResult(v.key, rnd, [float(r["steps_per_s"]) for r in out["rates"]], wall)


def pinned_cpu() -> int | None:
    """The CPU every overhead run pins the loop to: the last this process may use (CPU 0 takes
    most interrupts); None with fewer than 4 (pinning would crowd trainprof's own processes).
    The first H200 run saw plain runs of the host-bound loop differ by ±14 % between processes."""
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[-1] if len(cpus) >= 4 else None


def calibrate(c: Check, device: str, timeout: float, pin: list[str]) -> list[str] | None:
    cmd = [sys.executable, str(GPU_LOOP), "--device", device, *pin]
    cmd += ["--calibrate", ",".join(str(t) for t in TARGET_RATES)]
    try:
        proc = subprocess.run(cmd, env=c.env, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log(f"  calibration failed: {type(exc).__name__}: {exc}")
        return None
    out = last_json(proc.stdout)
    if proc.returncode != 0 or out is None:
        log(f"  calibration failed: {proc.stderr.strip()[-500:]}")
        return None
    c.overhead["calibration"] = out
    log(f"  calibrated sizes {out['sizes']}, measured {[round(x, 1) for x in out['measured']]}/s")
    return [str(s) for s in out["sizes"]]


def phase_overhead(c: Check, budget_s: float, a: argparse.Namespace) -> None:
    log(f"== overhead (budget {budget_s:.0f} s)")
    if a.device == "cuda" and not c.machine.get("cuda_available"):
        c.skip("overhead: CUDA is not available")
        return
    if budget_s < 40:
        c.skip(f"overhead: only {budget_s:.0f} s left")
        return
    t_start = time.monotonic()
    cpu = pinned_cpu() if a.pin else None
    c.overhead["pinned_cpu"] = cpu
    pin = ["--cpu", str(cpu)] if cpu is not None else []
    log(f"  the loop pinned to CPU {cpu}" if cpu is not None else "  the loop not pinned")
    sizes = a.sizes.split(",") if a.sizes else None
    if sizes is None and a.calibrate:
        sizes = calibrate(c, a.device, timeout=min(90.0, budget_s / 3), pin=pin)
    from bench.gpu_loop import DEFAULT_SIZES, seconds_per_size

    if sizes is None:
        sizes = DEFAULT_SIZES.split(",")
        log(f"  sizes {sizes} (not calibrated)")
    loop_args = ["--device", a.device, "--sizes", ",".join(sizes), *pin]
    per_size = seconds_per_size(a.toggle_s, len(sizes))
    toggle_args = [*loop_args, "--warmup-s", str(a.warmup_s), "--toggle-s", a.toggle_s]
    if not a.toggle_outside:
        toggle_args.append("--hooks-only")
    if a.toggle:
        probe_cost(c, toggle_args, timeout=90.0 + sum(per_size) + len(sizes) * 2 * a.warmup_s)
        if a.toggle_by_part_s > 0:  # each hook alone and empty, at the fast size only
            part_args = ["--device", a.device, "--sizes", sizes[0], *pin]
            part_args += ["--warmup-s", str(a.warmup_s), "--toggle-s", str(a.toggle_by_part_s)]
            part_args += ["--by-part", "--hooks-only"]
            timeout = 90.0 + a.toggle_by_part_s + 2 * a.warmup_s
            probe_cost(c, part_args, timeout=timeout, key="toggle_by_part")
        probe_micro(c, timeout=120.0)
    else:
        c.skip("probe cost (--toggle): --skip-toggle")
    loop_args += ["--warmup-s", str(a.warmup_s), "--measure-s", str(a.measure_s)]
    wanted = a.variants.split(",") if a.variants else [v.key for v in VARIANTS]
    variants = [v for v in VARIANTS if v.key in wanted or v.key == "plain"]
    res = OverheadResult(sizes=sizes, loop_args=loop_args, variants=variants)
    per_round: float | None = None
    with tempfile.TemporaryDirectory(prefix="trainprof-gpu-bench-") as tmp:
        for rnd in range(a.max_rounds):
            spent = time.monotonic() - t_start
            guess = per_round or len(variants) * (12.0 + 2 * (a.warmup_s + a.measure_s))
            if spent + guess > budget_s:
                c.skip(
                    f"overhead: rounds {rnd + 1}..{a.max_rounds} ({spent:.0f} s spent, a round "
                    f"takes ~{guess:.0f} s, budget {budget_s:.0f} s)"
                )
                break
            t_round = time.monotonic()
            order = variants if rnd % 2 == 0 else list(reversed(variants))
            for v in order:
                timeout = max(30.0, min(180.0, budget_s - (time.monotonic() - t_start) + 30))
                r = run_loop(c, v, loop_args, Path(tmp) / f"{v.key}-{rnd}", rnd, timeout)
                res.runs.append(r)
                shown = ", ".join(f"{x:.1f}" for x in r.rates) if r.rates else r.error
                log(f"  round {rnd + 1} {v.key:<11} {r.wall_s:5.1f} s  steps/s: {shown}")
                if r.detail:
                    log("    " + r.detail[-800:].replace("\n", "\n    "))
            res.rounds = rnd + 1
            per_round = time.monotonic() - t_round
    res.seconds = time.monotonic() - t_start
    rows = summarize(res)
    c.overhead.update(
        {
            "sizes": sizes,
            "rounds": res.rounds,
            "seconds": round(res.seconds, 1),
            "rows": rows,
            "runs": [
                {"variant": r.variant, "round": r.round, "rates": r.rates, "error": r.error}
                for r in res.runs
            ],
        }
    )
    if res.rounds < a.min_rounds:
        c.skip(f"overhead: only {res.rounds} of the {a.min_rounds} rounds wanted fitted")


def probe_cost(c: Check, loop_args: list[str], timeout: float, key: str = "toggle") -> None:
    """One ``trainprof run`` of ``gpu_loop.py --toggle``: the probe's in-loop µs per step on the
    device's clock, with an A/A control (resolves what whole-process rounds cannot); kept as
    ``c.overhead[key]``."""
    with tempfile.TemporaryDirectory(prefix="trainprof-gpu-toggle-") as tmp:
        cmd = [sys.executable, "-m", "trainprof", "run", "--quiet", "--run-dir", f"{tmp}/run"]
        cmd += [str(GPU_LOOP), *loop_args, "--toggle"]
        try:
            proc = subprocess.run(
                cmd, env=c.env, cwd=tmp, capture_output=True, text=True, timeout=timeout
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            c.skip(f"probe cost (--toggle): {type(exc).__name__}: {exc}")
            return
    out = last_json(proc.stdout)
    if proc.returncode != 0 or out is None or "toggle" not in out:
        c.skip(f"probe cost (--toggle): exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
        return
    c.overhead[key] = out
    for row in out["toggle"]:
        costs = ", ".join(f"{k} {v:+.1f}" for k, v in row["cost_us"].items())
        log(f"  probe cost {row['size']} at {row['steps_per_s']:.0f} steps/s (µs/step): {costs}")
        paired = ", ".join(f"{k} {v:+.1f} ± {e:.1f}" for k, (v, e) in row["cost_us_paired"].items())
        log(f"    paired: {paired}")


def probe_micro(c: Check, timeout: float) -> None:
    """``bench.micro`` under ``trainprof run``: each hook's own µs a call (hot caches), and what
    any hook pays on this host: a clock read, an empty wrapper, an empty optimizer hook."""
    with tempfile.TemporaryDirectory(prefix="trainprof-gpu-micro-") as tmp:
        cmd = [sys.executable, "-m", "trainprof", "run", "--quiet", "--no-stacks"]
        cmd += ["--run-dir", f"{tmp}/run", "--", sys.executable, "-m", "bench.micro"]
        env = {**c.env, "PYTHONPATH": str(ROOT)}
        try:
            proc = subprocess.run(
                cmd, env=env, cwd=tmp, capture_output=True, text=True, timeout=timeout
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            c.skip(f"probe micro: {type(exc).__name__}: {exc}")
            return
    out = last_json(proc.stdout)
    if proc.returncode != 0 or out is None or "hooks" not in out:
        c.skip(f"probe micro: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
        return
    c.overhead["micro"] = out
    for row in [*out["hooks"], *out.get("floors", [])]:
        log(f"  micro {row['name']}: {row['us']:.3f} µs a call")


def micro_markdown(c: Check) -> list[str]:
    out = c.overhead.get("micro")
    if not out:
        return []
    rows = [["per call, hot caches (`bench.micro`)", "µs"]]
    rows += [[r["name"], f"{r['us']:.3f}"] for r in [*out["hooks"], *out.get("floors", [])]]
    return ["", "### Each hook's own cost, and what any hook pays", "", stats.markdown_table(rows)]


def toggle_markdown(c: Check) -> list[str]:
    return _toggle_markdown(c, "toggle") + _toggle_markdown(c, "toggle_by_part") + micro_markdown(c)


def _toggle_markdown(c: Check, key: str) -> list[str]:
    out = c.overhead.get(key)
    if not out:
        return []
    modes = list(out["toggle"][0]["cost_us"])
    table = [["size (steps/s), blocks", "from", *modes]]
    for row in out["toggle"]:
        for which, label in (
            ("cost_us", "median"),
            ("cost_us_mean", "mean"),
            ("cost_us_paired", "paired"),
        ):
            if which not in row:
                continue
            if which == "cost_us_paired":
                cells = [f"{row[which][m][0]:+.1f} ± {row[which][m][1]:.1f}" for m in modes]
            else:
                cells = [f"{row[which][m]:+.1f}" for m in modes]
            size = f"{row['size']} ({row['steps_per_s']:.0f}/s), {row['blocks_per_mode']}"
            table.append([size if label == "median" else "", label, *cells])
    outside = (
        ", trainprof's outside processes stopped (`outside`: the parent's psutil/NVML sampler "
        "and py-spy, SIGSTOP; `runner`: the parent alone; `py-spy`: py-spy alone) and both "
        "(`everything`)"
        if "outside" in modes
        else ""
    )
    if key == "toggle_by_part":
        return [
            "",
            "### Each hook part alone (µs per step, device clock)",
            "",
            stats.markdown_table(table),
            "",
            "`gpu_loop.py --toggle --by-part`: as above, and `p alone` (all hooks off but part p) "
            "and `p empty` (all off, p's wrappers empty: each calls what it wraps and nothing "
            "else) against all off. Positive: what the part costs.",
        ]
    return [
        "",
        "### trainprof's cost inside one process (µs per step, device clock)",
        "",
        stats.markdown_table(table),
        "",
        *against_targets(out["toggle"]),
        "",
        "`gpu_loop.py --toggle` under `trainprof run`: interleaved blocks with the probe's hooks "
        f"on, unchanged (`same`: the A/A noise), all hooks off (`all`){outside}; a block's step "
        'time against "on", from the median block (the steady cost), from the mean (rare '
        'stalls count too) and paired (the median over cycles of "on" less the mode\'s block '
        "of the same cycle, ± its ~95 % interval: a drift of the machine cancels). Positive: "
        "what it costs.",
    ]


def against_targets(rows: list[dict[str, Any]]) -> list[str]:
    """Each size's paired cost of all hooks as a share of its step, against the issue's target
    nearest its rate (≤ 1 % at ≈ 100 steps/s, ≤ 3 % at ≈ 1000); a loop slower than the faster
    target (a host that cannot drive it that fast) also gets the same µs at that rate."""
    lines = []
    for row in rows:
        paired = row.get("cost_us_paired", {}).get("all")
        if not paired:
            continue
        cost, err = paired
        rate = row["steps_per_s"]
        target = min(TARGET_RATES, key=lambda t: abs(math.log(t / rate)))
        bound = TARGET_PERCENT[target]
        line = (
            f"- {row['size']}: all hooks {cost:+.1f} ± {err:.1f} µs a step = "
            f"{cost * rate / 1e4:+.2f} ± {err * rate / 1e4:.2f} % at its {rate:.0f} steps/s"
        )
        if rate < 0.8 * target:  # "≈": within a fifth of it
            line += f"; at {target:.0f} steps/s, {cost * target / 1e4:+.2f} ± {err * target / 1e4:.2f} %"
        lines.append(f"{line} (target ≤ {bound:g} % at ≈ {target:.0f} steps/s)")
    return lines


def overhead_markdown(c: Check) -> list[str]:
    rows = c.overhead.get("rows")
    if not rows:
        return []
    if not c.overhead.get("rounds"):
        return [f"## Overhead on {c.machine.get('card', '?')}", "", "No whole-process rounds ran."]
    table = ratio_rows(rows, c.overhead["sizes"], "plain (median steps/s)")
    spy = "with py-spy" if c.setup.get("py_spy_attach") == "ok" else "py-spy not working"
    lines = [
        f"## Overhead on {c.machine.get('card', '?')}",
        "",
        stats.markdown_table(table),
        "",
        f"Steps/s on the device's clock (CUDA events inside the loop), ratio to plain in the "
        f"same round: median (min–max) over {c.overhead['rounds']} rounds, [median loss]; a "
        f"ratio > 1 is noise. {spy}. {_pinned(c)} Variants: "
        + "; ".join(
            f"**{v.label}**: {v.meaning}" for v in VARIANTS if v.key in {r["key"] for r in rows}
        ),
    ]
    errors = [f"- {r['key']}: {e}" for r in rows for e in r["errors"][:2]]
    if errors:
        lines += ["", "Errors:", *errors]
    return lines


def _pinned(c: Check) -> str:
    cpu = c.overhead.get("pinned_cpu")
    if cpu is None:
        return "The loop ran on any CPU."
    return f"The loop was pinned to CPU {cpu} in every run (trainprof's processes were not)."


# ---------------------------------------------------------------- summary


def tests_markdown(c: Check) -> list[str]:
    t = c.tests
    if not t:
        return ["## Tests", "", "not run"]
    status = "stopped at the budget" if t.get("rc") is None else f"exit {t['rc']}"
    lines = [
        "## Tests",
        "",
        f"`{t['command']}`: {status} after {t['seconds']} s; "
        f"{t.get('passed', '?')} passed, {len(t.get('failed', []))} failed, "
        f"{len(t.get('skipped', []))} skipped",
    ]
    for f in t.get("failed", []):
        lines.append(f"- FAILED {f['test']}: {f['message'][:300]}")
    for s in t.get("skipped", []):
        lines.append(f"- skipped {s['test']}: {s['reason'][:200]}")
    slow = sorted(t.get("durations", {}).items(), key=lambda kv: -kv[1])[:12]
    if slow:
        lines.append("- durations: " + ", ".join(f"{n} {s} s" for n, s in slow))
    for m in t.get("measurements", []):
        lines.append(f"- measurement: `{json.dumps(m)}`")
    return lines


def write_summary(c: Check) -> dict[str, Any]:
    m = c.machine
    md = [
        f"# trainprof GPU check: {m.get('card', '?')}",
        "",
        f"torch {m.get('torch')} (CUDA {m.get('cuda')}), Python {m.get('python')}, "
        f"{m.get('cpus')} CPUs, compute capability {m.get('capability')}, "
        f"{m.get('memory_gib')} GiB; py-spy: {c.setup.get('py_spy_version') or 'missing'} "
        f"({c.setup.get('py_spy_attach')})",
        "",
        *tests_markdown(c),
        "",
        *overhead_markdown(c),
        *toggle_markdown(c),
    ]
    if c.skipped:
        md += ["", "## Skipped", "", *(f"- {s}" for s in c.skipped)]
    md.append("")
    text = "\n".join(md)
    log(text)
    if c.out is not None:
        c.out.mkdir(parents=True, exist_ok=True)
        (c.out / "gpu-check.md").write_text(text)
    t = c.tests
    return {
        "card": m.get("card"),
        "machine": m,
        "setup": {k: v for k, v in c.setup.items() if k != "py_spy"},
        "tests": {
            k: t.get(k)
            for k in ("rc", "seconds", "passed", "failed", "skipped", "measurements", "progress")
            if k in t
        },
        "overhead": {
            "sizes": c.overhead.get("sizes"),
            "rounds": c.overhead.get("rounds"),
            "calibrated": (c.overhead.get("calibration") or {}).get("measured"),
            "pinned_cpu": c.overhead.get("pinned_cpu"),
            "toggle": c.overhead.get("toggle"),  # with each block's µs a step, for a later look
            "toggle_by_part": c.overhead.get("toggle_by_part"),
            "micro": c.overhead.get("micro"),
            "rows": [
                {
                    "key": r["key"],
                    "cells": [
                        {k: (round(v, 4) if isinstance(v, float) else v) for k, v in cell.items()}
                        for cell in r["cells"]
                    ],
                    "errors": r["errors"][:2],
                }
                for r in c.overhead.get("rows", [])
            ],
        },
        "skipped": c.skipped,
        "wall_s": round(time.monotonic() - c.started, 1),
        "out": str(c.out) if c.out else None,
    }


def bring_back(work: Path, out: Path, summary: dict[str, Any]) -> None:
    """What comes back from the device machine: at most 8 files, no deep folders. The summary
    (``gpu-check.md``, written already, and ``gpu-check.json``), pytest's output, and one
    ``artifacts.tgz`` with every report, console text and measurement the tests kept."""
    import tarfile

    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu-check.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    if (work / "pytest.txt").is_file():
        shutil.copyfile(work / "pytest.txt", out / "pytest.txt")
    with tarfile.open(out / "artifacts.tgz", "w:gz") as tar:
        for name in ("reports", "measurements.jsonl", "gpu-junit.xml"):
            if (work / name).exists():
                tar.add(work / name, arcname=name)


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.gpu_check", description=__doc__)
    # H200 sessions: tests/gpu without the attach tests took ~305 s on 2026-11-28, the two
    # attach tests 42 s more, setup 11 s; the session timeout stops pytest starting tests 45 s
    # before the tests' budget. The overhead phase gets the rest (~95 s): the toggle (what
    # resolves a few µs a step) first, then whole-process rounds (~30 s each) as fit.
    ap.add_argument("--budget-s", type=float, default=480.0, help="wall budget, all phases")
    ap.add_argument("--tests-budget-s", type=float, default=400.0)
    ap.add_argument("--overhead-budget-s", type=float, default=130.0)
    ap.add_argument("--keep-going", action="store_true", help="pytest without -x")
    ap.add_argument("--only", default="", help="these tests (node ids or files, comma-separated)")
    ap.add_argument("--per-test-s", type=int, default=300, help="pytest --timeout")
    ap.add_argument("--skip-tests", action="store_true")
    ap.add_argument("--skip-overhead", action="store_true")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--sizes", default="", help="HxBxD,... for the loop (skips calibration)")
    ap.add_argument("--no-calibrate", dest="calibrate", action="store_false")
    ap.add_argument("--no-pin", dest="pin", action="store_false", help="leave the loop on any CPU")
    ap.add_argument("--min-rounds", type=int, default=1)
    ap.add_argument("--max-rounds", type=int, default=6)
    ap.add_argument(
        "--variants",
        default=",".join(DEFAULT_VARIANTS),
        help="overhead rounds: these variant keys, comma-separated (plain always); all: "
        + ",".join(v.key for v in VARIANTS),
    )
    ap.add_argument(
        "--toggle-s",
        default="45,15",
        help="in-process toggle, seconds per size, comma-separated (the last repeats): the "
        "fast size needs longer to resolve a few µs a step",
    )
    ap.add_argument(
        "--skip-toggle",
        dest="toggle",
        action="store_false",
        help="no in-process toggle: the overhead phase's budget goes to whole-process rounds",
    )
    ap.add_argument(
        "--toggle-by-part-s",
        type=float,
        default=30.0,
        help="seconds of a second toggle at the fast size: each hook part alone (all off but "
        "it) and the loop's parts as empty wrappers; 0: none",
    )
    ap.add_argument(
        "--toggle-outside",
        action="store_true",
        help="the toggle stops trainprof's outside processes too (four more modes, each with a "
        "third of the blocks; three H200 sessions found them costing nothing measurable)",
    )
    ap.add_argument("--warmup-s", type=float, default=0.5)
    ap.add_argument("--measure-s", type=float, default=1.5)
    ap.add_argument("--out", type=Path, default=None, help="default: $OUT, if set")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = _args(argv)
    out = a.out or (Path(os.environ["OUT"]) if os.environ.get("OUT") else None)
    c = Check(budget_s=a.budget_s, out=out)
    with tempfile.TemporaryDirectory(prefix="trainprof-gpu-check-") as tmp:
        c.work = Path(tmp)
        phase_setup(c, a.device)
        reserve = 0.0 if a.skip_overhead else min(a.overhead_budget_s, 60.0)
        if a.skip_tests:
            c.skip("tests: --skip-tests")
        else:
            budget = min(a.tests_budget_s, c.left() - reserve - 10)
            phase_tests(c, budget, a.keep_going, a.per_test_s, a.only)
        if a.skip_overhead:
            c.skip("overhead: --skip-overhead")
        else:
            phase_overhead(c, min(a.overhead_budget_s, c.left() - 10), a)
        summary = write_summary(c)
        if out is not None:
            bring_back(c.work, out, summary)
    log(json.dumps(summary, default=str))
    failed = bool(c.tests.get("failed")) or c.tests.get("rc", 0) not in (0, 5, None)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
