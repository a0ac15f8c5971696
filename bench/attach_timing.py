"""attach's timing claims, measured: its estimated it/s against `trainprof run`'s count, and the
target's own rate while py-spy samples it against its rate around that.

``python -m bench.attach_timing [--tries N] [--json PATH]``. A figure, not a test: on a shared
machine a try may find no clear rhythm (attach then says "not estimated", and no number) or a
neighbour's load may slow the target; each try is listed. The claims: the estimate is within
15 % of the count (at 2 and 50 it/s), and attaching keeps at least 90 % of the rate around it.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil

from bench import stats
from trainprof.examples.zoo import ZOO_DIR

PACED = ZOO_DIR / "attach_paced.py"
RATES = (2, 50)  # it/s of the paced job whose estimate is checked
RATE_LIMIT = 0.15  # the claim: |estimate - count| / count below this
SLOWDOWN_LIMIT = 0.9  # the claim: rate while attached / rate around, at least this


def _trainprof(*args: str) -> list[str]:
    return [sys.executable, "-m", "trainprof", *args]


@contextmanager
def _started(
    args: list[str], ready: str, timeout: float = 90
) -> Iterator[tuple[subprocess.Popen[str], list[tuple[float, str]]]]:
    """The job in the background, once it printed ``ready``: it, and its stdout lines timed as
    they came (monotonic clock). At the end it gets a Ctrl-C (`trainprof run` then reports
    what it counted), and its tree is killed if it has not ended a minute later."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines: list[tuple[float, str]] = []
    seen = threading.Event()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append((time.monotonic(), line))
            if ready in line:
                seen.set()

    threading.Thread(target=pump, daemon=True).start()
    try:
        if not seen.wait(timeout):
            raise RuntimeError(f"{args[-1]}: never printed {ready!r}")
        yield proc, lines
    finally:
        try:
            tree = psutil.Process(proc.pid).children(recursive=True)
        except psutil.Error:
            tree = []
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for child in tree:
            try:
                child.kill()
            except psutil.Error:
                pass


def _attach(pid: int, run_dir: Path, *extra: str) -> dict[str, Any]:
    """`trainprof attach PID` for 4 s: its report."""
    json_path = run_dir.with_suffix(".json")
    cmd = _trainprof("attach", str(pid), "--duration", "4", "-q", "--run-dir", str(run_dir))
    done = subprocess.run(
        [*cmd, "--json", str(json_path), *extra], capture_output=True, text=True, timeout=120
    )
    if done.returncode != 0:
        raise RuntimeError(f"trainprof attach: exit {done.returncode}: {done.stderr[-2000:]}")
    report: dict[str, Any] = json.loads(json_path.read_text())
    return report


def rate_error(rate: int, tmp: Path, tries: int) -> dict[str, Any]:
    """The paced job at ``rate`` it/s under `trainprof run`, attached up to ``tries`` times
    until one estimates a rate: that estimate against the steps run counted."""
    run_json = tmp / f"paced{rate}.json"
    job = _trainprof("run", "-q", "--run-dir", str(tmp / f"paced{rate}"), "--json", str(run_json))
    job += ["--", sys.executable, str(PACED), "--rate", str(rate), "--seconds", "11"]
    estimates: list[dict[str, Any]] = []
    with _started(job, "training") as (proc, _lines):
        python = next(
            c for c in psutil.Process(proc.pid).children() if str(PACED) in " ".join(c.cmdline())
        )
        for i in range(tries):
            report = _attach(python.pid, tmp / f"attach-{rate}-{i}")
            estimates.append(report["run"]["attach"]["iterations"])
            if estimates[-1]["steps_per_s"] is not None or not python.is_running():
                break
    measured = json.loads(run_json.read_text())["summary"]["steps_per_s"]
    found = next((e for e in estimates if e["steps_per_s"] is not None), None)
    error = abs(found["steps_per_s"] - measured) / measured if found else None
    return {
        "rate": rate,
        "measured_steps_per_s": measured,
        "estimated_steps_per_s": found["steps_per_s"] if found else None,
        "confidence": found.get("confidence") if found else None,
        "attaches": len(estimates),
        "reasons": [e.get("reason") for e in estimates if e["steps_per_s"] is None],
        "error": error,
    }


def _rates(lines: list[tuple[float, str]], lo: float, hi: float) -> list[float]:
    """The rates the paced job printed of itself ("rate R it/s at T") for T in [lo, hi]."""
    out = []
    for _when, line in lines:
        m = re.search(r"rate ([\d.]+) it/s at ([\d.]+)", line)
        if m and lo <= float(m[2]) <= hi:
            out.append(float(m[1]))
    return out


def slowdown(tmp: Path, tries: int) -> dict[str, Any]:
    """The unthrottled paced job prints its own rate twice a second; attached (200 Hz) ``tries``
    times: each time, its mean rate while sampled over its rate in the 3 s before and after."""
    job = [sys.executable, str(PACED), "--rate", "100000", "--seconds", str(10 + 10 * tries)]
    job += ["--report", "0.5"]
    ratios: list[float] = []
    with _started(job, "training") as (proc, lines):
        for i in range(tries):
            time.sleep(3)
            report = _attach(proc.pid, tmp / f"attach-slowdown-{i}", "--rate", "200")
            meta = json.loads((tmp / f"attach-slowdown-{i}" / "run.json").read_text())
            s0, s1 = meta["t_launch"], meta["t_launch"] + meta["wall_s"]
            time.sleep(3)
            during = _rates(lines, s0 + 0.5, s1)
            around = _rates(lines, s0 - 3, s0) + _rates(lines, s1 + 1, s1 + 3.5)
            if during and around and report:
                ratios.append(statistics.mean(during) / statistics.mean(around))
    return {
        "ratios": ratios,
        "median": statistics.median(ratios) if ratios else None,
    }


def table(results: dict[str, Any]) -> str:
    rows = [["claim", "measured", ""]]
    for r in results["rates"]:
        if r["error"] is None:
            why = (r["reasons"] or ["?"])[0].split(":")[0]
            value, status = f"not estimated in {r['attaches']} attaches ({why})", "n/a"
        else:
            value = (
                f"run {r['measured_steps_per_s']:.3f}, attach {r['estimated_steps_per_s']:.3f} "
                f"it/s ({r['confidence']}): {r['error']:.1%}"
            )
            status = "met" if r["error"] < RATE_LIMIT else "MISSED"
        rows.append([f"attach's it/s within 15 % at {r['rate']} it/s", value, status])
    s = results["slowdown"]
    if s["median"] is None:
        rows.append(["attaching keeps >= 90 % of the rate", "not measured", "n/a"])
    else:
        value = f"median {s['median']:.3f} (tries {', '.join(f'{x:.3f}' for x in s['ratios'])})"
        status = "met" if s["median"] >= SLOWDOWN_LIMIT else "MISSED"
        rows.append(["attaching keeps >= 90 % of the rate", value, status])
    return stats.format_table(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.attach_timing", description=__doc__)
    ap.add_argument("--tries", type=int, default=3, help="attaches per measure (default 3)")
    ap.add_argument("--json", type=Path, default=None, help="write the numbers to this file")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="trainprof-bench-attach-") as tmp:
        results = {
            "rates": [rate_error(rate, Path(tmp), a.tries) for rate in RATES],
            "slowdown": slowdown(Path(tmp), a.tries),
        }
    print(table(results))
    if a.json:
        a.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
