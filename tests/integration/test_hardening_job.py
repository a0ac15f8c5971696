"""The job survives trainprof's own troubles: a full disk, a killed runner, a crash right after
some steps, a Python that cannot load the probe. Each test runs trainprof for real."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from conftest import live_group_members, run_trainprof, trainprof_cmd, write_script

pytestmark = pytest.mark.slow


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs, for a run directory that fills up while the job runs."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


PRINTS_AND_TRAINS = """
    import time, torch
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step():
        opt.zero_grad(); model(torch.randn(8, 4)).sum().backward(); opt.step()

    for _ in range(30):  # quiet warm-up: recorded before the disk fills
        step(); time.sleep(0.03)
    time.sleep(0.6)  # the probe's timer flushes them
    for i in range(100_000):  # ~5 MB of output on a 1 MiB disk
        print(f"line {i:06d} " + "x" * 40)
        if i % 200 == 0:
            step()
    print("done", flush=True)
"""


def _run_on(
    disk: Path, tmp_path: Path, script: Path
) -> tuple[subprocess.CompletedProcess[str], Path]:
    run_dir, json_path = disk / "run", tmp_path / "report.json"
    cmd = trainprof_cmd(
        "run", "--quiet", "--run-dir", str(run_dir), "--json", str(json_path), str(script)
    )
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    return proc, run_dir


@pytest.mark.parallel  # judges no timing or load (CONTRIBUTING)
def test_disk_full_mid_run_the_job_runs_to_its_end(small_disk: Path, tmp_path: Path) -> None:
    """Was: the tee died on ENOSPC and closed the job's pipe (BrokenPipeError after ~19,700
    lines); the probe's flush raised ENOSPC inside optimizer.step(); report.json crashed."""
    script = write_script(tmp_path, "prints.py", PRINTS_AND_TRAINS)
    proc, run_dir = _run_on(small_disk, tmp_path, script)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 100_001 and lines[-1] == "done"
    assert lines[99_999] == "line 099999 " + "x" * 40
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    said = [ln for ln in proc.stderr.splitlines() if "recording stopped" in ln]
    assert len(said) == 1, proc.stderr[-3000:]
    assert "No space left on device" in said[0]
    meta = json.loads((run_dir / "run.json").read_text())  # written from the space held back
    assert meta["exit_code"] == 0
    rec = meta["recording"]
    assert rec["reason"] == "No space left on device"
    assert 0 < rec["stopped_at_s"] < meta["wall_s"]
    assert (run_dir / "report.json").is_file()
    assert not (run_dir / ".reserve").exists()
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["run"]["exit_code"] == 0
    assert 30 <= report["summary"]["steps"] < 530  # what was recorded: the warm-up at least


def test_disk_full_from_the_start(small_disk: Path, tmp_path: Path) -> None:
    with open(small_disk / "filler", "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    script = write_script(
        tmp_path,
        "small.py",
        """
        import torch
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for i in range(2000):
            print("line", i)
            if i % 100 == 0:
                opt.zero_grad(); model(torch.randn(8, 4)).sum().backward(); opt.step()
        """,
    )
    proc, _run_dir = _run_on(small_disk, tmp_path, script)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == [f"line {i}" for i in range(2000)]
    said = [ln for ln in proc.stderr.splitlines() if "recording stopped" in ln]
    assert len(said) == 1 and "0.0 s into the run" in said[0], proc.stderr[-3000:]
    assert "trainprof report" in proc.stderr  # the console report is still printed
    assert json.loads((tmp_path / "report.json").read_text())["run"]["exit_code"] == 0


RUNS_FOREVER = """
    import subprocess, time, torch
    subprocess.Popen(["sleep", "600"])  # a helper process in the job's group
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    i = 0
    while True:
        opt.zero_grad(); model(torch.randn(8, 4)).sum().backward(); opt.step()
        i += 1
        if i == 20:
            print("ready", flush=True)
        time.sleep(0.02)
"""


def _py_spy_of(pid: int) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        cmd = p.info["cmdline"] or []
        if p.info["status"] != psutil.STATUS_ZOMBIE and cmd and cmd[0].endswith("py-spy"):
            if str(pid) in cmd:
                found.append(p)
    return found


@pytest.mark.parallel  # judges no timing or load (CONTRIBUTING)
def test_runner_killed_takes_the_job_and_py_spy_with_it(tmp_path: Path) -> None:
    """Was: after a SIGKILL of trainprof, the job, its helpers and py-spy ran on, re-parented."""
    script = write_script(tmp_path, "forever.py", RUNS_FOREVER)
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        trainprof_cmd("run", "-q", "--run-dir", str(run_dir), str(script)),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=tmp_path,
    )
    assert proc.stdout is not None
    job_pid = None
    try:
        assert proc.stdout.readline().strip() == "ready"
        job_pid = json.loads((run_dir / "run.json").read_text())["pid"]
        time.sleep(1.5)  # steps flushed; py-spy attached
        assert len(live_group_members(job_pid)) >= 2  # the job and its helper
        spies = _py_spy_of(job_pid)
        proc.kill()  # SIGKILL: no handler runs, no cleanup
        proc.wait(timeout=10)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and (
            live_group_members(job_pid)
            or any(s.is_running() and s.status() != "zombie" for s in spies)
        ):
            time.sleep(0.2)
        assert live_group_members(job_pid) == [], "the job trained on without trainprof"
        assert not [s for s in spies if s.is_running() and s.status() != "zombie"], "py-spy ran on"
    finally:
        proc.kill()
        if job_pid is not None:
            try:
                os.killpg(job_pid, signal.SIGKILL)
            except OSError:
                pass
    json_path = tmp_path / "again.json"
    again = subprocess.run(
        trainprof_cmd("report", str(run_dir), "--json", str(json_path)),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert "ended before the job did" in again.stderr
    report = json.loads(json_path.read_text())
    assert report["run"]["stopped_by"] == "runner-died"
    assert report["summary"]["steps"] >= 20
    assert report["run"]["wall_s"] is not None
    assert not (run_dir / ".reserve").exists()


EMFILE_THEN_25_STEPS = """
    import os, resource, signal, time, torch
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))
    held = []
    try:
        while True:
            held.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        pass
    time.sleep(1.6)  # the probe's first timed flush finds no descriptor free
    for fd in held:
        os.close(fd)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for i in range(25):
        opt.zero_grad(); model(torch.randn(8, 4)).sum().backward(); opt.step()
        time.sleep(0.1)
    print(time.monotonic(), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_steps_before_a_sigkill_are_kept_but_the_last_second(tmp_path: Path) -> None:
    """Was: 25 steps, then SIGKILL: "0 optimizer steps". The timer thread ended for good at its
    first failed flush, so steps waited in memory for a 256-record flush that never came."""
    script = write_script(tmp_path, "crash.py", EMFILE_THEN_25_STEPS)
    r = run_trainprof(tmp_path, str(script))
    assert r.returncode == 137, r.stderr[-3000:]
    killed_at = float(r.stdout.split()[-1])
    assert r.report is not None
    assert r.report["summary"]["steps"] >= 15, r.stderr[-3000:]
    (events,) = r.run_dir.glob("events-*.tp")
    header = json.loads(events.read_text().split("\n", 1)[0][5:])
    last = max(int(ln.split()[1]) for ln in events.read_text().splitlines() if ln[:2] == "S ")
    assert killed_at - (header["t0"] + last / 1e6) <= 1.0  # a crash loses at most the last second


@pytest.mark.parallel  # judges no timing or load (CONTRIBUTING)
def test_syntax_error_is_quoted_in_run_json(tmp_path: Path) -> None:
    script = write_script(tmp_path, "broken.py", "import torch\nx = (\nprint(1)\n")
    r = run_trainprof(tmp_path, str(script))
    assert r.returncode == 1
    meta = json.loads((r.run_dir / "run.json").read_text())
    assert meta["exception"] == {
        "type": "SyntaxError",
        "message": "'(' was never closed (broken.py, line 2)",
    }
    assert r.report is not None and r.report["summary"]["steps"] == 0


TRAINS = """
    import torch
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for i in range(20):
        opt.zero_grad(); model(torch.randn(8, 4)).sum().backward(); opt.step()
    print("trained")
"""


@pytest.mark.parallel  # judges no timing or load (CONTRIBUTING)
def test_python_isolated_mode_says_the_probe_could_not_load(tmp_path: Path) -> None:
    """Was: under `python -I` the report claimed "torch was never imported"."""
    script = write_script(tmp_path, "train.py", TRAINS)
    r = run_trainprof(tmp_path, "--", sys.executable, "-I", str(script))
    assert r.returncode == 0 and r.stdout == "trained\n", r.stderr[-3000:]
    reason = "python -I ignores PYTHONPATH, so the probe could not load"
    assert f"trainprof: {reason}" in r.stderr
    meta = json.loads((r.run_dir / "run.json").read_text())
    assert meta["probe"] == {"loaded": False, "reason": reason}
    assert not list(r.run_dir.glob("events-*.tp"))
    # the job's steps were not seen, which is not "0 steps" (it said "0 optimizer steps")
    assert r.report is not None and r.report["summary"]["steps"] is None
    assert "not measured: the probe did not load in the job" in r.stderr, r.stderr[-3000:]
    assert "Not judged: the probe did not load in the job" in r.stderr
    skipped = {s["id"]: s["reason"] for s in r.report["skipped"]}
    assert (
        skipped["input-bound"] == "the probe did not load in the job: nothing it measures was seen"
    )

    python = shlex.quote(sys.executable)  # the suite runs from a path with a space in it too
    hidden = run_trainprof(
        tmp_path, "--", "sh", "-c", f"exec {python} -I {shlex.quote(str(script))}"
    )
    meta = json.loads((hidden.run_dir / "run.json").read_text())
    assert meta["probe"]["loaded"] is False
    assert meta["probe"]["reason"].startswith("no process of the job loaded the probe")

    plain = write_script(tmp_path, "plain.py", "print('no torch here')\n")
    r = run_trainprof(tmp_path, str(plain))
    assert json.loads((r.run_dir / "run.json").read_text())["probe"] == {"loaded": True}


@pytest.mark.parallel  # judges no timing or load (CONTRIBUTING)
def test_a_probe_that_fails_to_start_in_the_job_is_named(tmp_path: Path) -> None:
    """A stale ``trainprof`` earlier on the job's PYTHONPATH (an old checkout) shadows the
    installed one, and the probe's import fails inside the job: the report names that failure
    (it said "torch was never imported" of a job that trained)."""
    stale = tmp_path / "old-checkout" / "trainprof"
    stale.mkdir(parents=True)
    (stale / "__init__.py").write_text("raise ImportError('a stale copy of trainprof')\n")
    script = write_script(tmp_path, "train.py", TRAINS)
    python, path = shlex.quote(sys.executable), shlex.quote(str(script))
    job = f'PYTHONPATH="$PYTHONPATH:{stale.parent}" exec {python} {path}'
    r = run_trainprof(tmp_path, "--", "sh", "-c", job)
    assert r.returncode == 0 and r.stdout == "trained\n", r.stderr[-3000:]
    probe = json.loads((r.run_dir / "run.json").read_text())["probe"]
    assert probe["loaded"] is False, probe
    assert probe["reason"].startswith(
        "the job's Python could not start the probe: ImportError: a stale copy of trainprof "
        "(Python 3."
    ), probe
    assert r.report is not None and r.report["summary"]["steps"] is None
    assert "torch was never imported" not in r.stderr
    # said while the job runs too, not only at the end of what may be a long job
    assert (
        "trainprof: the job's Python could not start the probe: ImportError: a stale copy of "
        "trainprof (Python 3."
    ) in r.stderr, r.stderr[-3000:]


SLOTTED_ITERATOR_JOB = """
import torch
from torch import nn
from torch.utils.data import DataLoader

class Slotted:
    # an iterator that takes no new attributes: the probe cannot tag its epoch on it
    __slots__ = ("inner",)

    def __init__(self, inner):
        self.inner = inner

    def __iter__(self):
        return self

    def __next__(self):
        return next(self.inner)

class Loader(DataLoader):
    def _get_iterator(self):
        return Slotted(super()._get_iterator())

model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    for x in Loader(torch.randn(64, 4), batch_size=8):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
print("job finished")
"""


@pytest.mark.parallel  # judges no timing or load (CONTRIBUTING)
def test_a_probe_error_leaves_the_job_alone_and_the_report_says_it(tmp_path: Path) -> None:
    """The probe fails open: here it cannot tag a custom iterator with its epoch start. The
    job runs to its end, its steps are counted, and the report says what the probe could not
    do (once, not per epoch), so a missing fact is not read as a clean bill."""
    script = write_script(tmp_path, "slotted.py", SLOTTED_ITERATOR_JOB)
    r = run_trainprof(tmp_path, "--no-stacks", str(script))
    assert r.returncode == 0, r.stderr
    assert "job finished" in r.stdout
    assert r.report is not None
    assert r.report["summary"]["steps"] == 16
    errors = r.report["summary"]["probe_errors"]
    assert len(errors) == 1 and errors[0].startswith("DataLoader.__iter__: AttributeError"), errors
    shown = subprocess.run(
        trainprof_cmd("report", str(r.run_dir)), capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.replace("│", " ").split())  # the panel's lines, unwrapped
    assert "probe error, facts may be missing: DataLoader.__iter__: AttributeError" in text


AT_WORK_AFTER_TRAINING = """
import os, signal, time
import torch
from torch import nn

told = []  # SIGUSR1 from the test: trainprof said this silence is at work, go on
signal.signal(signal.SIGUSR1, lambda *_: told.append(time.monotonic()))
LONGEST_S = 30.0  # a silence lasts until trainprof judged it (or this long: the test fails)

def evaluate(model, xs, ys):  # a final evaluation over tensors in memory: no DataLoader
    correct, end = 0, time.monotonic() + LONGEST_S
    with torch.no_grad():
        while not told and time.monotonic() < end:
            for x, y in zip(xs, ys):
                correct += int((model(x).argmax(1) == y).sum())
    return correct

def save_slowly(path):  # a checkpoint written to a slow disk, chunk after chunk, one line
    chunk, end = bytes(256 << 10), time.monotonic() + LONGEST_S
    with open(path, "wb") as f:
        while len(told) < 2 and time.monotonic() < end: f.write(chunk); f.flush(); time.sleep(0.05)

def train(model, opt, steps):
    for _ in range(steps):
        x, y = torch.randn(32, 16), torch.randint(0, 4, (32,))
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

print("pid", os.getpid(), flush=True)
torch.set_num_threads(1)
model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
train(model, opt, 40)
print("accuracy", evaluate(model, [torch.randn(32, 16)] * 8, [torch.randint(0, 4, (32,))] * 8))
train(model, opt, 5)
save_slowly("checkpoint.bin")
print("saved", flush=True)
"""


def test_a_silence_at_work_is_not_stopped_as_a_hang(tmp_path: Path) -> None:
    """After its steps, a job evaluates (its stack moves) and then writes a checkpoint from one
    line (its stack keeps still; it writes), each silence lasting until the watch has judged
    it, past the hang limit: with --on-hang kill, both were stopped as hangs, 1.5 s into the
    evaluation. The real hangs (the zoo's, in test_zoo and test_ci_cli) are still stopped."""
    script = write_script(tmp_path, "train_then_evaluate.py", AT_WORK_AFTER_TRAINING)
    run_dir, json_path = tmp_path / "run", tmp_path / "report.json"
    cmd = trainprof_cmd(
        "run", "--quiet", "--run-dir", str(run_dir), "--json", str(json_path),
        "--timeout", "60", "--on-hang", "kill", "--hang-after", "1.5", str(script),
    )  # fmt: skip
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.readline()
        assert first.startswith("pid "), first
        pid = int(first.split()[1])
        err = []
        for line in proc.stderr:  # each verdict ends the silence it judged
            err.append(line)
            if "at work" in line:
                with contextlib.suppress(ProcessLookupError):  # (a report's line, once ended)
                    os.kill(pid, signal.SIGUSR1)
        out = proc.stdout.read()
        proc.wait(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    stderr = "".join(err)
    assert proc.returncode == 0, stderr[-3000:]
    report = json.loads(json_path.read_text())
    assert report["run"]["stopped_by"] is None
    assert "hang" not in [f["id"] for f in report["findings"]], report["findings"]
    assert "saved" in out
    said = [line for line in stderr.splitlines() if "at work" in line]
    assert len(said) == 2, stderr[-3000:]
    assert "moved" in said[0] and "evaluate()" in said[0], said
    assert "read or wrote" in said[1], said


STEPS_ON_A_FULL_DISK = """
    import sys, time, torch
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step():
        opt.zero_grad(); model(torch.randn(8, 4)).sum().backward(); opt.step()

    for _ in range(20):  # recorded before the disk fills
        step(); time.sleep(0.02)
    time.sleep(0.7)  # the probe's timer flushes them
    sys.stdout.write(("x" * 99 + "\\n") * 15_000)  # 1.5 MB of output: the disk fills
    sys.stdout.flush()
    t0 = time.monotonic()
    # steps the event file no longer shows, for 7 s: over the 2 s of silence and the 2 s of
    # looks after which a watch blind to them stops the job, with 3 s to spare
    while time.monotonic() - t0 < 7:  # the main thread is asleep on one line: its stacks
        step(); time.sleep(0.05)  # look still
    print("last line", flush=True)
"""


@pytest.mark.parallel  # judges no timing or load (CONTRIBUTING)
@pytest.mark.parametrize("command", ["run", "ci"])
def test_a_full_disk_does_not_make_the_hang_watch_kill(
    small_disk: Path, tmp_path: Path, command: str
) -> None:
    """Was: recording stopped, the event file stopped growing, and the watch took that for a
    hang ("no progress for 12 s after 32187 optimizer steps"): exit 124, and `ci` exit 3."""
    script = write_script(tmp_path, "full.py", STEPS_ON_A_FULL_DISK)
    run_dir, json_path = small_disk / "run", tmp_path / "report.json"
    flags = ["--on-hang", "kill"] if command == "run" else ["--steps", "1000000"]
    cmd = trainprof_cmd(
        command, "--quiet", "--hang-after", "2", "--run-dir", str(run_dir),
        "--json", str(json_path), *flags, str(script),
    )  # fmt: skip
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-1] == "last line"
    assert "no progress" not in proc.stderr and "stands down" not in proc.stderr, proc.stderr
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta.get("hang") is None and meta["stopped_by"] is None
    rec = meta["recording"]
    assert rec["reason"] == "No space left on device" and 0 < rec["stopped_at_s"] < meta["wall_s"]
    # counted in the progress page: ~20 a second for 7 s on an idle machine, fewer beside load
    assert rec["unrecorded"]["steps"] >= 20
    report = json.loads(json_path.read_text())
    assert report["run"]["recording"]["stopped_at_s"] == rec["stopped_at_s"]


@pytest.mark.parallel  # judges no timing or load (CONTRIBUTING)
def test_the_hang_watch_stands_down_when_nothing_counts_the_steps(
    small_disk: Path, tmp_path: Path
) -> None:
    """Recording stopped and the job's steps cannot be counted (its progress page is gone): the
    watch says it stands down, and the job runs to its end, never stopped as hung."""
    body = STEPS_ON_A_FULL_DISK.replace(
        "    for _ in range(20):  # recorded",
        "    import os\n    os.unlink(os.path.join(os.environ['TRAINPROF_RUN_DIR'], 'progress'))\n"
        "    for _ in range(20):  # recorded",
    )
    script = write_script(tmp_path, "uncounted.py", body)
    run_dir = small_disk / "run"
    cmd = trainprof_cmd(
        "run", "--quiet", "--hang-after", "2", "--on-hang", "kill", "--run-dir", str(run_dir),
        str(script),
    )  # fmt: skip
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-1] == "last line"
    said = [ln for ln in proc.stderr.splitlines() if "stands down" in ln]
    assert len(said) == 1, proc.stderr[-3000:]
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta.get("hang") is None and meta["stopped_by"] is None
    rec = meta["recording"]
    assert "unrecorded" not in rec
    assert rec["stopped_at_s"] < rec["hang_watch_stood_down_at_s"] < meta["wall_s"]
