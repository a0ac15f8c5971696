"""A real cgroup CPU quota (where this machine lets the tests make one: root and a writable cpu
controller, v1 or v2): the zoo's oversubscribed job under a 1-CPU quota is named CPU-starved
with the quota's throttling as the cause, and told to size its threads to it."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import trainprof_cmd

from trainprof.examples.zoo import script_path

CGROUP = Path("/sys/fs/cgroup")


def _make_quota(name: str, cpus: float) -> Path | None:
    """A cgroup of its own limited to ``cpus``; None where none can be made here."""
    period = 100_000
    for base, files in (
        (
            CGROUP / "cpu",
            {"cpu.cfs_period_us": str(period), "cpu.cfs_quota_us": str(int(cpus * period))},
        ),
        (CGROUP, {"cpu.max": f"{int(cpus * period)} {period}"}),
    ):
        d = base / name
        try:
            d.mkdir(exist_ok=True)
            for file, value in files.items():
                (d / file).write_text(value)
            return d
        except OSError:
            try:
                d.rmdir()
            except OSError:
                pass
    return None


@pytest.fixture
def one_cpu_quota() -> Iterator[Path]:
    d = _make_quota(f"trainprof-test-{os.getpid()}", 1.0)
    if d is None:
        pytest.skip("no cgroup with a CPU quota can be made here (needs root and cgroupfs)")
    try:
        yield d
    finally:
        try:
            d.rmdir()
        except OSError:
            pass


def test_a_quota_that_throttles_oversized_threads_is_named(
    tmp_path: Path, one_cpu_quota: Path
) -> None:
    json_path = tmp_path / "run.json"
    cmd = trainprof_cmd(
        "run", "--quiet", "--run-dir", str(tmp_path / "run"), "--json", str(json_path),
        str(script_path("oversubscribed")),
    )  # fmt: skip
    enter = f"echo $$ > {shlex.quote(str(one_cpu_quota / 'cgroup.procs'))} && exec "
    done = subprocess.run(
        ["sh", "-c", enter + shlex.join(cmd)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "ZOO_THREADS": "4", "ZOO_STEPS": "120"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(json_path.read_text())
    first = report["findings"][0]
    assert first["id"] == "cpu-starved", report["findings"]
    evidence = "\n".join(first["evidence"])
    assert "the cgroup's CPU quota (1 CPU) stopped the job in" in evidence, evidence
    assert "with torch's 4 intra-op threads" in evidence, evidence
    assert first["fix"][0].startswith("size the job to the quota"), first["fix"]
    assert "torch.set_num_threads(1)" in first["fix"][0], first["fix"]
