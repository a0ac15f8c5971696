"""Recorded run directories (tests/data/runs/): real `trainprof run`s kept without this machine's paths.

A recording replaces each of the machine's paths by a placeholder (``@PKG@`` for trainprof's
package, ``@PURELIB@`` for site-packages, ...); ``materialize`` copies one back out with the paths
of the machine the tests run on, so the analysis reads it as a run made there. To record them
again (a change to what the probe or the samplers store), from the repository's root::

    .venv/bin/python tests/recorded.py [NAME ...]

on a machine that is otherwise idle (a busy one makes a healthy job CPU-starved), then read the
new snapshots' diff (tests/data/snapshots.json). After a change to the analysis, the snapshots
alone: ``.venv/bin/python tests/recorded.py --snapshots``.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

import trainprof

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "tests" / "data" / "runs"
SNAPSHOTS = ROOT / "tests" / "data" / "snapshots.json"

# Zoo scripts recorded, each with the trainprof options it ran with: a healthy loader, two slow
# cases, a crash, and the two runs whose settings `compare` must tell apart from the healthy one
# (persistent_workers=False; torch threads 4x the CPUs).
CASES: dict[str, tuple[str, ...]] = {
    "healthy_loader": (),
    "input_bound": (),
    "checkpoint_stall": (),
    "crash_shape": (),
    "worker_startup": (),
    "oversubscribed": (),
}
# Files a run directory holds that the analysis does not read (report.json is written again by
# `trainprof report`; progress is the live status line's; the probe-loaded marker is kept).
LEFT_OUT = {"report.json", "progress"}


def _machine_paths(run_dir: Path, cwd: Path) -> list[tuple[str, str]]:
    """(this machine's path, placeholder), the most specific first: each is replaced before any
    path it lies inside."""
    pkg = Path(trainprof.__file__).resolve().parent
    pairs = {
        str(run_dir): "@RUN@",
        str(cwd): "@CWD@",
        sysconfig.get_paths()["purelib"]: "@PURELIB@",
        sys.executable: "@PYTHON@",
        str(pkg): "@PKG@",
        str(ROOT): "@ROOT@",
        sysconfig.get_paths()["stdlib"]: "@STDLIB@",
        tempfile.gettempdir(): "@TMP@",  # a job's own temporary files (a checkpoint)
    }
    return sorted(pairs.items(), key=lambda kv: -len(kv[0]))


def _here(run_dir: Path) -> list[tuple[str, str]]:
    """(placeholder, this machine's path) for a recording copied out to ``run_dir``."""
    pkg = Path(trainprof.__file__).resolve().parent
    return [
        ("@RUN@", str(run_dir)),
        ("@CWD@", str(run_dir.parent)),
        ("@PURELIB@", sysconfig.get_paths()["purelib"]),
        ("@PYTHON@", sys.executable),
        ("@PKG@", str(pkg)),
        ("@ROOT@", str(ROOT)),
        ("@STDLIB@", sysconfig.get_paths()["stdlib"]),
        ("@TMP@", tempfile.gettempdir()),
    ]


def _rewrite(src: Path, dst: Path, pairs: list[tuple[str, str]]) -> None:
    """Copy a file, each ``old`` of ``pairs`` replaced by its ``new`` (inside a .gz as well)."""
    raw = src.read_bytes()
    packed = src.suffix == ".gz"
    text = (gzip.decompress(raw) if packed else raw).decode("utf-8", errors="surrogateescape")
    for old, new in pairs:
        text = text.replace(old, new)
    data = text.encode("utf-8", errors="surrogateescape")
    dst.write_bytes(gzip.compress(data, mtime=0) if packed else data)


def materialize(name: str, parent: Path) -> Path:
    """A copy of recording ``name`` under ``parent``, with this machine's paths."""
    run_dir = parent / name
    run_dir.mkdir(parents=True)
    for src in sorted((RUNS / name).iterdir()):
        _rewrite(src, run_dir / src.name, _here(run_dir))
    return run_dir


def unmaterialize(text: str, run_dir: Path) -> str:
    """Text about a materialized recording, its machine paths put back as placeholders."""
    for placeholder, path in sorted(_here(run_dir), key=lambda kv: -len(kv[1])):
        text = text.replace(path, placeholder)
    return text


def report_of(run_dir: Path, width: int = 80) -> tuple[dict[str, Any], str]:
    """`trainprof report RUN_DIR` in this process: the report's dict and its console text."""
    from rich.console import Console

    from trainprof.report import report
    from trainprof.store.session import Session

    console = Console(record=True, width=width, file=io.StringIO(), color_system=None)
    data = report(Session.load(run_dir), None, console=console)
    return data, console.export_text()


def stable_parts(report: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """What a snapshot keeps of a report: its problems (warnings, errors) in order, and the
    first one's id, where and claims (seconds, to the ms), machine paths as placeholders."""
    problems = [f for f in report["findings"] if f["severity"] != "info"]
    first = problems[0] if problems else None
    return {
        "problems": [f["id"] for f in problems],
        "first": None
        if first is None
        else {
            "id": first["id"],
            "where": None if first["where"] is None else unmaterialize(first["where"], run_dir),
            "claims": {k: round(v, 3) for k, v in sorted(first["claims"].items())},
        },
    }


def write_snapshots() -> None:
    """Analyse every recording with this trainprof and store what its snapshot keeps."""
    snapshots = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in CASES:
            run_dir = materialize(name, Path(tmp))
            snapshots[name] = stable_parts(report_of(run_dir)[0], run_dir)
    SNAPSHOTS.write_text(json.dumps(snapshots, indent=1) + "\n")


def record(name: str) -> Path:
    """Run zoo script ``name`` under `trainprof run` and store its run directory, sanitized."""
    from trainprof.examples.zoo import ZOO, script_path

    case = ZOO[name]
    with tempfile.TemporaryDirectory(prefix="trainprof-record-") as tmp:
        cwd = Path(tmp).resolve()
        run_dir = cwd / name
        cmd = [sys.executable, "-m", "trainprof", "run", "-q", "--run-dir", str(run_dir)]
        cmd += ["--timeout", str(case.timeout_s), *CASES[name], str(script_path(name))]
        # the job runs with the `python` on PATH, as a user's would: this environment's
        path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
        env = {**os.environ, "PATH": path}
        proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
        print(f"{name}: exit {proc.returncode}", file=sys.stderr)
        report = json.loads((run_dir / "report.json").read_text())
        problems = [f["id"] for f in report["findings"] if f["severity"] != "info"]
        print(f"  problems: {problems} (the zoo expects {case.expect})", file=sys.stderr)
        out = RUNS / name
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        pairs = _machine_paths(run_dir, cwd)
        for src in sorted(run_dir.iterdir()):
            if src.name not in LEFT_OUT and src.is_file():
                _rewrite(src, out / src.name, pairs)
                os.chmod(out / src.name, 0o644)
    return out


def main(args: list[str]) -> None:
    if args == ["--snapshots"]:
        write_snapshots()
        return
    for name in args or list(CASES):
        record(name)
    write_snapshots()


if __name__ == "__main__":
    main(sys.argv[1:])
