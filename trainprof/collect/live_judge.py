"""Findings while the job runs: the run so far judged by the same rules, at a bounded cost.

The runner's ``LiveJudge`` starts ``python -m trainprof.collect.live_judge RUN_DIR`` now and
then; that process loads the run so far, analyses it as the report would, and writes
``live.json``: the findings so far (once the steady state has ``MIN_STEPS`` steps), and each
change of them along the run (a finding that appeared, went away, or changed severity), with
the time since launch. Each judgement's CPU time sets the wait before the next, so the judging
costs at most ``CPU_SHARE`` of one CPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from trainprof.store.rundir import LIVE

MIN_STEPS = 200  # steady steps before findings are said: the rules' own minimum, and more
CPU_SHARE = 0.01  # of one CPU, averaged over the run
FIRST_AFTER_S = 10.0  # the first judgement, after the launch (the job's start-up is not judged)
MIN_INTERVAL_S = 15.0
ENV_INTERVAL = "TRAINPROF_LIVE_INTERVAL_S"  # a fixed interval instead (tests, short demos)
MAX_CHANGES = 200  # kept in live.json: the first ones (a run that flips forever is said so)


class LiveJudge:
    """Starts a judgement when the last one is done and its cost allows; never waits for one."""

    def __init__(self, run_dir: Path, started_at: float) -> None:
        self.run_dir = run_dir
        self.started_at = started_at
        self.fixed_s = _seconds(os.environ.get(ENV_INTERVAL))
        self.next_at = started_at + (self.fixed_s if self.fixed_s else FIRST_AFTER_S)
        self.proc: subprocess.Popen[bytes] | None = None
        self.cpu_s = 0.0  # all judgements' CPU so far
        self.mtime: float | None = None
        self.findings: list[dict[str, Any]] = []  # the latest live.json's, for the status line

    def poll(self, now: float) -> None:
        """Reap a finished judgement (and read what it wrote); start the next one when due."""
        if self.proc is not None:
            cpu = _reap(self.proc)
            if cpu is None:
                return
            self.proc = None
            self.cpu_s += cpu
            # the judge's average cost stays within CPU_SHARE: wait 1/CPU_SHARE of what it took
            self.next_at = now + (self.fixed_s or max(MIN_INTERVAL_S, cpu / CPU_SHARE))
        if now >= self.next_at:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "trainprof.collect.live_judge", str(self.run_dir)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={k: v for k, v in os.environ.items() if not k.startswith("TRAINPROF_")},
            )
        self._read()

    def _read(self) -> None:
        path = self.run_dir / LIVE
        try:
            mtime = path.stat().st_mtime
            if mtime == self.mtime:
                return
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        self.mtime = mtime
        if isinstance(data, dict) and isinstance(data.get("findings"), list):
            self.findings = [f for f in data["findings"] if isinstance(f, dict)]

    def close(self) -> None:
        """Stop a judgement still running: the final report follows."""
        proc, self.proc = self.proc, None
        if proc is not None and _reap(proc) is None:
            proc.kill()
            proc.wait()

    def status(self) -> str | None:
        """The status line's field: the findings so far, most harmful first."""
        shown = [f for f in self.findings if f.get("severity") != "info"]
        if not shown:
            return None
        first = shown[0]
        impact = first.get("impact")
        share = f" {impact:.0%}" if isinstance(impact, (int, float)) else ""
        more = f" +{len(shown) - 1}" if len(shown) > 1 else ""
        return f"so far: {first.get('id')}{share}{more}"


def _seconds(text: str | None) -> float | None:
    try:
        value = float(text) if text else None
    except ValueError:
        return None
    return value if value is not None and value > 0 else None


def _reap(proc: subprocess.Popen[bytes]) -> float | None:
    """The finished judgement's CPU seconds (reaped here, with its rusage); None while it runs."""
    try:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
    except ChildProcessError:
        return 0.0
    if pid == 0:
        return None
    proc.returncode = os.waitstatus_to_exitcode(status)
    return float(usage.ru_utime + usage.ru_stime)


def judge(run_dir: Path) -> dict[str, Any]:
    """The findings of the run so far and their changes since the last judgement: live.json."""
    from trainprof.analysis.pipeline import analyze
    from trainprof.store import rundir
    from trainprof.store.session import Session

    session = Session.load(run_dir)
    meta = session.meta
    launched = meta.get("t_launch")
    now_s = time.monotonic() - float(launched) if isinstance(launched, (int, float)) else None
    meta.setdefault("wall_s", now_s)
    metrics, verdict = analyze(session)
    steady = metrics.steady
    enough = steady is not None and steady.count >= MIN_STEPS
    findings = (
        [
            {
                "id": f.id,
                "severity": f.severity,
                "title": f.title,
                "impact": None if f.impact is None else round(f.impact, 4),
                "where": f.where,
            }
            for f in verdict.findings
        ]
        if enough
        else []
    )
    previous = _previous(run_dir / LIVE)
    changes = list(previous.get("changes") or [])
    first = previous.get("first_judged_s")
    if enough and first is None and now_s is not None:
        first = round(now_s, 1)
    if enough and len(changes) < MAX_CHANGES:
        changes.extend(_changes(previous.get("findings") or [], findings, now_s))
    data = {
        "so_far": True,
        "t_s": None if now_s is None else round(now_s, 1),
        "steps": metrics.total_steps,
        "steady_steps": steady.count if steady is not None else 0,
        "judged": enough,
        "first_judged_s": first,  # what appeared at this first judgement was there from the start
        "waiting_for": None if enough else f"{MIN_STEPS} steady steps",
        "findings": findings,
        "changes": changes[:MAX_CHANGES],
    }
    rundir.write_json(run_dir / LIVE, data)
    return data


def _previous(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _changes(
    before: list[dict[str, Any]], after: list[dict[str, Any]], t_s: float | None
) -> list[dict[str, Any]]:
    """Each finding that appeared, went away or changed severity between two judgements."""
    was = {f.get("id"): f for f in before if isinstance(f, dict)}
    now = {f["id"]: f for f in after}
    t = None if t_s is None else round(t_s, 1)
    out = []
    for fid, f in now.items():
        if fid not in was:
            out.append({"t_s": t, "id": fid, "change": "appeared", "severity": f["severity"]})
        elif was[fid].get("severity") != f["severity"]:
            out.append({"t_s": t, "id": fid, "change": "changed", "severity": f["severity"]})
    for fid, f in was.items():
        if fid not in now:
            out.append({"t_s": t, "id": fid, "change": "gone", "severity": f.get("severity")})
    return out


def main(argv: list[str]) -> int:
    try:
        judge(Path(argv[0]))
    except Exception:  # a judgement that fails says nothing: the final report will
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
