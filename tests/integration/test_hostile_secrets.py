"""The hostile corpus's secrets in the job's own output, for real: a job argument named
``--no-redact``, a runner killed by SIGKILL (the OOM killer) while the job prints a secret, a
secret split across two writes, and one straddling the 4 MiB head of ``stdout.log``. No file
of the run holds the secret at any moment; the terminal still gets the job's bytes as they are.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import trainprof_cmd

pytestmark = [pytest.mark.slow, pytest.mark.parallel]  # judges no timing or load (CONTRIBUTING)
SECRET = "hf_corpusSECRET12345"
ENV = {**os.environ, "HF_TOKEN": SECRET}

PRINTS_SECRET = """\
import os, sys
token = os.environ["HF_TOKEN"]
print("token", token, flush=True)
print("on stderr", token, file=sys.stderr, flush=True)
raise RuntimeError("failed with " + token)
"""

KEEPS_RUNNING = """\
import os, sys
token = os.environ["HF_TOKEN"]
sys.stdout.write("half " + token[:7])  # a secret split across two writes
sys.stdout.flush()
sys.stdin.readline()  # the test saw the first half go through
print(token[7:] + " whole " + token, flush=True)
print("err " + token, file=sys.stderr, flush=True)
print("printed", flush=True)
sys.stdin.readline()  # runs until the runner is killed
"""


def tp(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        trainprof_cmd(*args), cwd=cwd, env=ENV, capture_output=True, text=True, timeout=240
    )


def holding(paths: list[Path], *pieces: str) -> list[str]:
    """The names of the files (under ``paths``) that hold any of ``pieces``."""
    found = []
    for path in paths:
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for f in files:
            data = f.read_bytes()
            if any(piece.encode() in data for piece in pieces):
                found.append(f.name)
    return found


def test_a_job_argument_named_no_redact_unmasks_nothing(tmp_path: Path) -> None:
    """Only trainprof's own --no-redact, before the script, turns masking off: the redactor
    read it from sys.argv, where the runner holds the job's command and the probe the job's."""
    job = tmp_path / "j.py"
    job.write_text(PRINTS_SECRET)
    run_dir, out = tmp_path / "run", tmp_path / "r.json"
    p = tp(
        "run", "-q", "--run-dir", str(run_dir), "--json", str(out), str(job), "--no-redact",
        cwd=tmp_path,
    )  # fmt: skip
    assert p.returncode == 1, p.stderr[-3000:]
    assert "a trainprof bug" not in p.stderr
    assert f"token {SECRET}" in p.stdout  # the job's own output passes through as it is
    assert holding([run_dir, out], SECRET) == []
    assert json.loads(out.read_text())["run"]["command"][-1] == "--no-redact"
    assert b"token ***" in (run_dir / "stdout.log").read_bytes()  # masked, not dropped
    # trainprof's own option still keeps everything as given
    as_given = tmp_path / "as-given"
    p = tp("run", "-q", "--no-redact", "--run-dir", str(as_given), str(job), cwd=tmp_path)
    assert p.returncode == 1, p.stderr[-3000:]
    assert {"stdout.log", "stderr.log", "run.json"} <= set(holding([as_given], SECRET))


def _read_until(fd: int, marker: bytes, seen: bytearray, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while marker not in seen:
        assert time.monotonic() < deadline, bytes(seen[-500:])
        if select.select([fd], [], [], 1)[0]:
            chunk = os.read(fd, 65536)
            assert chunk, bytes(seen[-500:])
            seen += chunk


def test_a_runner_killed_by_sigkill_leaves_no_secret_on_disk(tmp_path: Path) -> None:
    """The OOM killer's SIGKILL leaves no chance to mask at the end: the copy of the job's
    output is masked as it is written, line by line, a secret split across writes too."""
    job = tmp_path / "j.py"
    job.write_text(KEEPS_RUNNING)
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        trainprof_cmd("run", "-q", "--run-dir", str(run_dir), str(job)), cwd=tmp_path, env=ENV,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    try:
        seen = bytearray()
        _read_until(proc.stdout.fileno(), b"half " + SECRET[:7].encode(), seen)
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
        _read_until(proc.stdout.fileno(), b"printed\n", seen)
        assert f"whole {SECRET}".encode() in seen  # the terminal gets the job's bytes
        job_pid = json.loads((run_dir / "run.json").read_text())["pid"]
        deadline = time.monotonic() + 30
        # each stream's copy follows the terminal at once, each from its own pipe: stderr's
        # line may land after stdout's last one
        for name, last in (("stdout.log", b"printed"), ("stderr.log", b"err ")):
            log = run_dir / name
            while last not in log.read_bytes():
                assert time.monotonic() < deadline, (name, log.read_bytes())
                time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)  # the runner, as the OOM killer would
        proc.wait(timeout=30)
        try:  # the runner's watchdog stops the job: wait for it, so no file is written after
            psutil.Process(job_pid).wait(timeout=30)
        except psutil.NoSuchProcess:
            pass
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert holding([run_dir], SECRET, SECRET[7:], SECRET[:9]) == []
    assert b"half *** whole ***\n" in (run_dir / "stdout.log").read_bytes()
    assert b"err ***" in (run_dir / "stderr.log").read_bytes()
    # a later report masks what it reads of a copy an older trainprof left unmasked
    (run_dir / "stderr.log").write_text(f"RuntimeError: failed with {SECRET}\n")
    p = tp("report", str(run_dir), "--json", str(tmp_path / "r.json"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    assert SECRET not in p.stdout + p.stderr and holding([tmp_path / "r.json"], SECRET) == []


def test_a_secret_across_the_head_cut_keeps_no_half(tmp_path: Path) -> None:
    """stdout.log keeps the first 4 MiB and the last 1 MiB: masked after the cut, a secret
    straddling it kept its first half."""
    from trainprof.collect.output import HEAD_BYTES

    job = tmp_path / "j.py"
    job.write_text(
        "import os, sys\n"
        f"sys.stdout.write('x' * {HEAD_BYTES - 6} + os.environ['HF_TOKEN'] + '\\n')\n"
        "sys.stdout.write(('y' * 1023 + '\\n') * 2048)\n"
    )
    run_dir = tmp_path / "run"
    p = tp("run", "-q", "--run-dir", str(run_dir), str(job), cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    data = (run_dir / "stdout.log").read_bytes()
    assert b"bytes omitted]" in data  # the copy was cut
    assert SECRET[:6].encode() not in data and b"x***\n" in data


def test_attach_masks_the_jobs_secrets_this_shell_does_not_have(tmp_path: Path) -> None:
    """attach knew only its own environment's secrets: a job's token, passed as a plain
    argument and set in the job's environment alone, was stored in run.json and printed."""
    script = tmp_path / "spin.py"
    script.write_text(
        "import time\nprint('ready', flush=True)\nt = time.monotonic()\n"
        "while time.monotonic() - t < 60:\n    sum(range(1000))\n"
    )
    job = subprocess.Popen(
        [sys.executable, str(script), SECRET], env=ENV, stdout=subprocess.PIPE, text=True
    )
    assert job.stdout is not None and job.stdout.readline() == "ready\n"
    try:
        p = subprocess.run(
            trainprof_cmd(
                "attach", "-q", "--duration", "2", "--run-dir", str(tmp_path / "run"),
                "--json", str(tmp_path / "a.json"), str(job.pid),
            ),
            cwd=tmp_path, env={k: v for k, v in os.environ.items() if k != "HF_TOKEN"},
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        job.kill()
        job.wait()
    assert p.returncode == 0, p.stderr[-3000:]
    assert SECRET not in p.stdout + p.stderr
    assert holding([tmp_path / "run", tmp_path / "a.json"], SECRET) == []
    assert json.loads((tmp_path / "a.json").read_text())["run"]["command"][-1] == "***"
