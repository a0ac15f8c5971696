"""`trainprof doctor` end to end: the real CLI in a subprocess, on this machine.

Controlled conditions are real too: a lowered RLIMIT_NOFILE via prlimit on the child, a torch
package on PYTHONPATH whose import fails, secrets in the environment.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.parallel  # judges no timing or load (CONTRIBUTING)

COMMAND = (sys.executable, "-m", "trainprof")
SECRETS = {
    "HF_TOKEN": "hf_zzTOPsecretTOKEN42",
    "AWS_SECRET_ACCESS_KEY": "aws/SECRET+key/987654321",
    "MY_PASSWORD": "hunter2-but-longer",
}


def doctor(
    *args: str,
    env: dict[str, str] | None = None,
    prefix: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*prefix, *COMMAND, "doctor", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "120", **(env or {})},
        timeout=120,
    )


def load(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


def by_id(doc: dict[str, Any], check_id: str) -> dict[str, Any]:
    (row,) = [c for c in doc["checks"] if c["id"] == check_id]
    return row


def test_plain_run_on_this_machine(tmp_path: Path) -> None:
    # WHEN doctor runs with its JSON report, secrets and a debugging variable in the environment
    out = tmp_path / "doctor.json"
    t0 = time.perf_counter()
    p = doctor("--json", str(out), env={**SECRETS, "CUDA_LAUNCH_BLOCKING": "1"})
    wall = time.perf_counter() - t0
    # THEN it prints the table and exits by its own verdict, without a traceback
    assert "Traceback" not in p.stdout + p.stderr
    assert "trainprof doctor" in p.stdout and "area" in p.stdout
    doc = load(out)
    assert doc["schema"] == "trainprof.doctor/1"
    assert p.returncode == doc["exit_code"] == (1 if doc["summary"]["fail"] else 0), p.stdout
    assert by_id(doc, "launch-blocking")["status"] == "warn"
    assert "CUDA_LAUNCH_BLOCKING=1" in p.stdout
    # no secret in any output
    for name, value in SECRETS.items():
        for text in (p.stdout, p.stderr, out.read_text()):
            assert value not in text and name not in text
    # every gatherer's row is there, grouped by area
    assert {"shm", "limits", "cpu", "memory", "torch", "gpu", "disk"} <= {
        c["area"] for c in doc["checks"]
    }
    assert wall < doc["elapsed_s"] + 3.0  # start-up and rendering stay small


def test_strict_fails_on_a_warning(tmp_path: Path) -> None:
    out = tmp_path / "d.json"
    p = doctor("--strict", "--json", str(out), env={"CUDA_LAUNCH_BLOCKING": "1"})
    doc = load(out)
    assert p.returncode == 1 and doc["strict"] is True and doc["exit_code"] == 1
    assert "--strict and a check warned" in p.stdout or "a check failed" in p.stdout


def test_low_open_file_limit_on_the_child_fails(tmp_path: Path) -> None:
    # GIVEN the doctor itself runs under a 200-fd limit, set by prlimit (or setrlimit) on the child
    out = tmp_path / "d.json"
    prlimit = shutil.which("prlimit")
    if prlimit:
        p = doctor("--workers", "4", "--json", str(out), prefix=(prlimit, "--nofile=200:200"))
    else:
        p = subprocess.run(
            [*COMMAND, "doctor", "--workers", "4", "--json", str(out)],
            capture_output=True,
            text=True,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (200, 200)),
        )
    doc = load(out)
    row = by_id(doc, "nofile-low")
    assert row["status"] == "fail" and row["severity"] == "error", row
    assert "RLIMIT_NOFILE soft 200, hard 200" in row["evidence"]
    assert p.returncode == 1


def test_broken_torch_is_a_finding_not_a_crash(tmp_path: Path) -> None:
    # GIVEN a torch on PYTHONPATH whose import fails the way a CUDA-library mismatch does
    pkg = tmp_path / "shadow" / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "raise ImportError('libcudnn.so.9: cannot open shared object file: No such file')\n"
    )
    out = tmp_path / "d.json"
    p = doctor("--json", str(out), env={"PYTHONPATH": str(tmp_path / "shadow")})
    # THEN the CLI (which never imports torch) runs, and reports it as a failed check
    assert "Traceback" not in p.stdout + p.stderr
    row = by_id(load(out), "torch-missing")
    assert (row["status"], row["title"]) == ("fail", "torch is installed but fails to import")
    assert any("libcudnn.so.9" in e for e in row["evidence"])
    assert p.returncode == 1


def test_job_options_reach_the_checks(tmp_path: Path) -> None:
    data = tmp_path / "dataset"
    data.mkdir()
    for i in range(20):
        (data / f"{i}.jpg").write_bytes(os.urandom(32 * 1024))
    out = tmp_path / "d.json"
    p = doctor(
        "--workers", "3", "--batch-mb", "50", "--data", str(data), "--ckpt-dir",
        str(tmp_path / "ckpt"), "--json", str(out),
    )  # fmt: skip
    doc = load(out)
    assert doc["options"]["workers"] == 3 and doc["options"]["batch_mb"] == 50
    assert any("3 workers x prefetch 2" in e for e in by_id(doc, "shm-small")["evidence"])
    assert by_id(doc, "data-read-slow")["evidence"][0].startswith("read 20 files")
    assert "not created yet" in by_id(doc, "ckpt-disk-low")["evidence"][0]
    assert p.returncode == doc["exit_code"]


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    cases = [
        (("--data", str(tmp_path / "nope")), "--data"),
        (("--workers", "-1"), "--workers must be 0 or more"),
        (("--batch-mb", "0"), "--batch-mb must be more than 0"),
        (("--json", str(tmp_path / "no" / "dir" / "x.json")), "--json"),
    ]
    for args, needle in cases:
        p = doctor(*args)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        assert "Traceback" not in p.stderr
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("trainprof: ") and needle in lines[0]
