"""`trainprof run` is transparent: exit codes, tracebacks, argv, cwd, signals, sitecustomize."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    as_a_terminal_job,
    live_group_members,
    run_trainprof,
    trainprof_cmd,
    write_script,
)

import trainprof

pytestmark = pytest.mark.parallel  # judges no timing or load (CONTRIBUTING)

OWN = os.path.dirname(trainprof.__file__) + os.sep  # trainprof's package, as imported

ECHO_ENV = """
    import json, os, sys
    print(json.dumps({"argv": sys.argv, "name": __name__, "cwd": os.getcwd(), "path": sys.path[1:]}))
"""


def started(
    reaped: Any, cwd: Path, *args: str, preexec_fn: Callable[[], Any] = as_a_terminal_job
) -> subprocess.Popen[str]:
    """``trainprof ARGS`` in the background, as a terminal's foreground job, its output piped;
    killed at the test's teardown if still running."""
    proc = subprocess.Popen(
        trainprof_cmd(*args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        preexec_fn=preexec_fn,
    )
    return reaped(proc)  # type: ignore[no-any-return]


def ctrl_c_once(
    proc: subprocess.Popen[str], run_dir: Path, when: Callable[[dict[str, Any]], bool]
) -> None:
    """A Ctrl-C to trainprof at an exact point: it is stopped (SIGSTOP) as soon as its
    run.json shows ``when``, sent SIGINT, and let go on."""
    deadline = time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline and proc.poll() is None, "run.json never showed it"
        try:
            if when(json.loads((run_dir / "run.json").read_text())):
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.002)
    os.kill(proc.pid, signal.SIGSTOP)
    os.kill(proc.pid, signal.SIGINT)
    os.kill(proc.pid, signal.SIGCONT)


def test_exit_zero_and_report(tmp_path: Path) -> None:
    script = write_script(tmp_path, "ok.py", "print('hello')\n")
    r = run_trainprof(tmp_path, str(script))
    assert r.returncode == 0
    assert r.stdout == "hello\n"
    assert r.report is not None and r.report["schema"] == "trainprof.report/1"
    assert r.report["run"]["exit_code"] == 0
    assert "trainprof report" in r.stderr


def test_exit_code_is_the_jobs(tmp_path: Path) -> None:
    script = write_script(tmp_path, "three.py", "import sys\nsys.exit(3)\n")
    r = run_trainprof(tmp_path, str(script))
    assert r.returncode == 3
    assert r.report is not None and r.report["run"]["exit_code"] == 3


def test_traceback_exactly_as_without_trainprof(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        "boom.py",
        """
        def inner():
            raise ValueError("bad value ü")

        inner()
        """,
    )
    plain = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path
    )
    r = run_trainprof(tmp_path, str(script))
    assert plain.returncode == r.returncode == 1
    assert "ValueError: bad value ü" in plain.stderr
    # The job's stderr comes through byte for byte; trainprof's report follows it.
    assert r.stderr.startswith(plain.stderr)


def test_killed_by_sigkill_is_137(tmp_path: Path) -> None:
    script = write_script(
        tmp_path, "kill.py", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"
    )
    r = run_trainprof(tmp_path, str(script))
    assert r.returncode == 137
    assert r.report is not None and r.report["run"]["signal"] == "SIGKILL"
    assert r.report["run"]["killed_at_shutdown"] is not True  # killed mid-script
    assert "a kill loses up to its last 0.5 s of records" in r.stderr


def test_an_abort_as_python_shuts_down_is_told_apart_from_a_kill_mid_script(
    tmp_path: Path,
) -> None:
    """A native library whose teardown aborts at exit (as "terminate called without an active
    exception" does): here an object freed as the interpreter shuts down."""
    script = write_script(
        tmp_path,
        "teardown.py",
        """
        import os

        class NativeHandle:
            def __del__(self):
                os.abort()

        handle = NativeHandle()
        print("done")
        """,
    )
    r = run_trainprof(tmp_path, str(script))
    assert r.returncode == 134 and r.stdout == "done\n"
    assert r.report is not None and r.report["run"]["signal"] == "SIGABRT"
    assert r.report["run"]["killed_at_shutdown"] is True
    out = " ".join(w for w in r.stderr.split() if w != "│")  # the console's wrapped lines
    assert "killed by SIGABRT (exit 134) in" in out
    assert ", as Python shut down after the script ended" in out
    assert "the script ran to its end and every record was written" in out


def test_argv_name_cwd_path_as_without_trainprof(tmp_path: Path) -> None:
    script = write_script(tmp_path, "echo.py", ECHO_ENV)
    args = [str(script), "--epochs", "3", "ä b"]
    plain = subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=tmp_path)
    r = run_trainprof(tmp_path, *args)
    assert json.loads(r.stdout) == json.loads(plain.stdout)


def test_command_form_and_module(tmp_path: Path) -> None:
    write_script(tmp_path, "mymod.py", ECHO_ENV)
    plain = subprocess.run(
        [sys.executable, "-m", "mymod", "x"], capture_output=True, text=True, cwd=tmp_path
    )
    r = run_trainprof(tmp_path, "--", sys.executable, "-m", "mymod", "x")
    assert r.returncode == 0
    assert json.loads(r.stdout) == json.loads(plain.stdout)


def test_user_sitecustomize_still_runs(tmp_path: Path, clean_env: dict[str, str]) -> None:
    site = tmp_path / "usersite"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import builtins\nbuiltins.USER_SITE_RAN = True\n")
    script = write_script(
        tmp_path, "check.py", "import builtins\nprint(getattr(builtins, 'USER_SITE_RAN', False))\n"
    )
    clean_env["PYTHONPATH"] = str(site)
    r = run_trainprof(tmp_path, str(script), env=clean_env)
    assert r.stdout.strip() == "True"


def test_probe_adds_no_third_party_module_before_torch(tmp_path: Path) -> None:
    script = write_script(
        tmp_path, "mods.py", "import json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    )
    plain = set(
        json.loads(
            subprocess.run([sys.executable, str(script)], capture_output=True, text=True).stdout
        )
    )
    r = run_trainprof(tmp_path, str(script))
    with_probe = set(json.loads(r.stdout))
    added = with_probe - plain
    assert any(m.startswith("trainprof.probe") for m in added), "the probe did not start"
    # "sitecustomize" is the bootstrap itself: the interpreter keeps the module it imported.
    ours = {"trainprof", "sitecustomize"}
    third_party = {m for m in added if m.split(".")[0] not in sys.stdlib_module_names | ours}
    assert third_party == set()
    assert not {"torch", "rich", "typer", "psutil", "pynvml"} & {
        m.split(".")[0] for m in with_probe
    }


def test_script_without_torch_gets_a_report(tmp_path: Path) -> None:
    script = write_script(
        tmp_path, "plain.py", "total = sum(i * i for i in range(200000))\nprint(total)\n"
    )
    r = run_trainprof(tmp_path, str(script))
    assert r.returncode == 0
    assert r.report is not None
    assert r.report["summary"]["steps"] == 0
    assert r.report["summary"]["steps_per_s"] is None
    assert "torch was never imported" in r.stderr


@pytest.mark.parametrize("options", [(), ("--no-color",)])
def test_missing_script_is_one_clear_line(tmp_path: Path, options: tuple[str, ...]) -> None:
    """With ``--no-color`` after ``run`` too: trainprof's, not the job's command."""
    proc = subprocess.run(
        trainprof_cmd("run", *options, "nope.py"), capture_output=True, text=True, cwd=tmp_path
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == "trainprof: no such script: nope.py"
    assert not (tmp_path / "trainprof-runs").exists()


def test_missing_command_is_one_clear_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        trainprof_cmd("run", "--", "no-such-program-xyz"),
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == "trainprof: command not found: no-such-program-xyz"


def test_mistyped_option_is_named_as_one(tmp_path: Path) -> None:
    proc = subprocess.run(
        trainprof_cmd("run", "--stepz", "5", "train.py"), capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "trainprof: no such option: --stepz (--help lists them; did you mean --steps?)"
    )


def test_run_dir_symlink_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target)
    script = write_script(tmp_path, "ok.py", "print(1)\n")
    proc = subprocess.run(
        trainprof_cmd("run", "--run-dir", str(link), str(script)),
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert "symlink" in proc.stderr
    assert list(target.iterdir()) == []


def test_default_run_dir_is_private(tmp_path: Path) -> None:
    script = write_script(tmp_path, "ok.py", "print(1)\n")
    proc = subprocess.run(
        trainprof_cmd("run", "-q", str(script)), capture_output=True, text=True, cwd=tmp_path
    )
    assert proc.returncode == 0
    (run_dir,) = (tmp_path / "trainprof-runs").iterdir()
    assert run_dir.name.endswith("-ok")
    assert (run_dir.stat().st_mode & 0o777) == 0o700
    assert {"run.json", "samples.jsonl", "report.json", "stdout.log", "stderr.log"} <= {
        p.name for p in run_dir.iterdir()
    }
    assert (run_dir / "stdout.log").read_text() == "1\n"


def test_ctrl_c_is_forwarded_and_a_partial_report_written(tmp_path: Path, reaped: Any) -> None:
    script = write_script(
        tmp_path,
        "loop.py",
        """
        import sys, torch
        model = torch.nn.Linear(8, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        step = 0
        try:
            while True:
                opt.zero_grad(); model(torch.randn(4, 8)).sum().backward(); opt.step()
                step += 1
                if step == 30:
                    print("ready", flush=True)
        except KeyboardInterrupt:
            print("job saw KeyboardInterrupt", flush=True)
            raise
        """,
    )
    run_dir = tmp_path / "run"
    proc = started(reaped, tmp_path, "run", "-q", "--run-dir", str(run_dir), str(script))
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert "job saw KeyboardInterrupt" in out
    assert proc.returncode == 130
    report = json.loads((run_dir / "report.json").read_text())
    assert report["run"]["stopped_by"] == "interrupt"
    assert report["summary"]["steps"] >= 30
    assert "partial report" in err
    # Python ends an uncaught KeyboardInterrupt with SIGINT after its exit handlers: an
    # interrupt, not a crash at shutdown
    assert report["run"]["signal"] == "SIGINT" and report["run"]["killed_at_shutdown"] is False
    assert "as Python shut down" not in err


def test_second_signal_kills_a_stubborn_job_and_leaves_no_orphans(
    tmp_path: Path, reaped: Any
) -> None:
    script = write_script(
        tmp_path,
        "workers.py",
        """
        import os, signal, time, torch
        from torch.utils.data import DataLoader, Dataset

        class Forever(Dataset):
            def __len__(self): return 10**9
            def __getitem__(self, i):
                return torch.zeros(4)

        def stubborn(signum, frame):  # a job that will not stop on Ctrl-C
            print("got SIGINT", flush=True)

        signal.signal(signal.SIGINT, stubborn)
        loader = DataLoader(Forever(), batch_size=4, num_workers=2)
        for i, b in enumerate(loader):
            if i == 5:
                print("ready", flush=True)
        """,
    )
    run_dir = tmp_path / "run"
    proc = started(
        reaped, tmp_path, "run", "-q", "--timeout", "600", "--run-dir", str(run_dir), str(script)
    )
    assert proc.stdout is not None
    first = proc.stdout.readline().strip()
    if first != "ready":
        proc.kill()
        raise AssertionError(
            f"job did not start: {first!r}\n{proc.stderr.read() if proc.stderr else ''}"
        )
    meta = json.loads((run_dir / "run.json").read_text())
    proc.send_signal(signal.SIGINT)  # forwarded, and shrugged off by the job
    while proc.stdout.readline().strip() != "got SIGINT":
        pass
    proc.send_signal(signal.SIGINT)  # the second one ends it, as Ctrl-C twice would
    proc.communicate(timeout=60)
    assert proc.returncode == 137
    assert live_group_members(meta["pid"]) == [], "job processes were left behind"


def _catches(pid: int, signum: int) -> bool:
    status = Path(f"/proc/{pid}/status").read_text()
    caught = int(next(ln for ln in status.splitlines() if ln.startswith("SigCgt:")).split()[1], 16)
    return bool(caught >> (signum - 1) & 1)


def test_a_ctrl_c_the_shell_made_the_job_ignore_stays_ignored(tmp_path: Path, reaped: Any) -> None:
    """`trainprof run train.py &` in a script (or nohup) starts trainprof with SIGINT ignored,
    and the job inherits that: it goes on through a Ctrl-C, as without trainprof. trainprof
    must not catch it either (it would SIGKILL the job at the second)."""
    script = write_script(
        tmp_path,
        "until_told.py",
        """
        import os, time
        print("ready", flush=True)
        while not os.path.exists("stop"):
            time.sleep(0.01)
        print("stopped as told", flush=True)
        """,
    )
    proc = started(
        reaped,
        tmp_path,
        "run",
        "-q",
        "--run-dir",
        str(tmp_path / "run"),
        str(script),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    deadline = time.monotonic() + 60
    while not _catches(proc.pid, signal.SIGTERM):  # trainprof now watches the job
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.01)
    assert not _catches(proc.pid, signal.SIGINT)
    for _ in range(2):
        proc.send_signal(signal.SIGINT)
    (tmp_path / "stop").touch()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]
    assert out == "stopped as told\n"
    assert "interrupted" not in err


DATASET_ERROR = """
import torch
from torch.utils.data import DataLoader, Dataset

class Broken(Dataset):
    def __len__(self):
        return 8
    def __getitem__(self, i):
        if i == 5:
            raise ValueError(f"corrupt sample {i}")
        return torch.zeros(2)

for batch in DataLoader(Broken(), batch_size=2, num_workers=WORKERS):
    pass
"""


def test_dataloader_error_traceback_is_as_without_trainprof(tmp_path: Path) -> None:
    for workers in (0, 2):
        script = write_script(
            tmp_path, f"broken{workers}.py", DATASET_ERROR.replace("WORKERS", str(workers))
        )
        plain = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path
        )
        r = run_trainprof(tmp_path, str(script))
        assert "corrupt sample 5" in plain.stderr
        assert r.returncode == plain.returncode == 1
        job_stderr = r.stderr[: r.stderr.index("╭─ trainprof report")]
        # no frame of trainprof's package (its probe, its bootstrap sitecustomize); the word
        # alone proves nothing: the checkout's own folder may be named trainprof
        assert OWN not in plain.stderr and OWN not in job_stderr
        assert "sitecustomize" not in job_stderr
        if workers == 0:
            assert job_stderr == plain.stderr
        else:
            # Which of torch's own lines re-raises depends on which worker answered first (a
            # race, with or without trainprof); the worker's traceback text must be identical.
            worker_part = plain.stderr[plain.stderr.index("Original Traceback") :]
            assert job_stderr.endswith(worker_part)


def test_a_ctrl_c_as_the_job_starts_is_the_jobs(tmp_path: Path, reaped: Any) -> None:
    """A Ctrl-C between the job's start and trainprof's watch over it (its samplers and py-spy
    starting) stopped trainprof itself with a KeyboardInterrupt, and its watchdog the job, with
    no report. It is held and passed on: trainprof is stopped (SIGSTOP) as soon as run.json
    names the job's pid, sent SIGINT, and let go on."""
    script = write_script(
        tmp_path, "forever.py", "import time\nwhile True:\n    time.sleep(0.01)\n"
    )
    run_dir = tmp_path / "run"
    proc = started(reaped, tmp_path, "run", "-q", "--run-dir", str(run_dir), str(script))
    ctrl_c_once(proc, run_dir, lambda meta: "pid" in meta)  # the job has started
    _out, err = proc.communicate(timeout=60)
    # 130: the job's KeyboardInterrupt; 1: it landed in the job's start-up imports, where
    # Python prints it and exits 1 (it does so without trainprof too). trainprof raises none.
    assert proc.returncode in (1, 130), err[-2000:]
    assert "trainprof/collect/runner.py" not in err and "trainprof/cli.py" not in err, err[-2000:]
    report = json.loads((run_dir / "report.json").read_text())
    assert report["run"]["stopped_by"] == "interrupt"


def test_a_ctrl_c_after_the_job_ended_does_not_cost_the_report(tmp_path: Path, reaped: Any) -> None:
    """A Ctrl-C meant for the job often lands just after it ended, while trainprof writes the
    report (an attach test's SIGINT did, and the report was lost): it is said, not obeyed. The
    signal is delivered exactly then: trainprof is stopped (SIGSTOP) as soon as run.json has the
    job's exit code, sent SIGINT, and let go on."""
    script = write_script(tmp_path, "short.py", "print('done', flush=True)\n")
    run_dir, json_path = tmp_path / "run", tmp_path / "report.json"
    views = ("--html", str(tmp_path / "r.html"), "--trace", str(tmp_path / "t.json"))
    args = ("run", "-q", "--run-dir", str(run_dir), "--json", str(json_path), *views)
    proc = started(reaped, tmp_path, *args, str(script))
    # the job has ended; the report is not written yet
    ctrl_c_once(proc, run_dir, lambda meta: meta.get("exit_code") is not None)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]  # the job's exit code, not 130
    assert "the job has ended; finishing its report" in err
    assert json.loads(json_path.read_text())["run"]["exit_code"] == 0
    assert out == "done\n"
