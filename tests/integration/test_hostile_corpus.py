"""One corpus of hostile input through every command and every output format, for real.

A torch job whose script name, arguments, hot function, DataLoader class and exception message
hold markup, quotes, ``::``, newlines, control characters, ESC sequences, bytes that are not
UTF-8 and a secret; one job printing a 10 MB line; and damaged report.json and run.json files.
Each goes through ``run``, ``report``, ``ci`` and ``compare`` with ``--json``, ``--html``,
``--trace``, ``--junit``, GitHub annotations and the step summary. Every command exits with its
contract's code (never a traceback), every file is well-formed, no secret is published, and the
hostile text is still there, escaped.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import psutil
import pytest
from conftest import trainprof_cmd

pytestmark = [pytest.mark.slow, pytest.mark.parallel]  # judges no timing or load (CONTRIBUTING)
BAD_BYTES = os.fsdecode(b"caf\xe9-\xff\xfe")  # not UTF-8: a lone surrogate per byte in Python
HOSTILE = "<script>alert(1)</script></style>\"'::error::x%0A,a:b\r\n\x1b[31mred\x07"
SECRET = "hf_corpusSECRET12345"
URL_PASSWORD = "s3cretPassw0rd"
ARGS = (BAD_BYTES, HOSTILE, "--max_tokens", "512", "--hf_token", SECRET)
# py-spy drops every stack whose file name or function name is not valid Unicode: the run and
# report see them in names it can read; ci (no stacks needed) runs a script named in raw bytes.
SCRIPT_NAME = "job<script>'\"::\x1b[1m.py"
BYTES_SCRIPT_NAME = "job<script>" + os.fsdecode(b"\xff\xfe") + ".py"
FUNC = "hot<script>\x1b[31m</style>::\n,a:b"
LOADER = "Loader<script>\x1b]0;title\x07</style>"

JOB = """\
import os, sys, types
import torch
from torch.utils.data import DataLoader, TensorDataset

Hostile = type({loader!r}, (DataLoader,), {{}})
Data = type({loader!r} + "Data", (TensorDataset,), {{}})  # the probe records its qualname


def hot(x):
    for _ in range(8):
        x = torch.tanh(x @ x.T)
    return x.sum()


names = {{k: {func!r} for k in ("co_name", "co_qualname") if hasattr(hot.__code__, k)}}
hot = types.FunctionType(hot.__code__.replace(**names), globals())
model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
ds = Data(torch.randn(512, 16), torch.randn(512, 1))
for epoch in range(2):
    for x, y in Hostile(ds, batch_size=16):
        opt.zero_grad()
        hot(torch.randn(256, 256))
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
print("trained", flush=True)
raise RuntimeError(
    {hostile!r} + " https://bob:{password}@hub.example/x " + os.environ["HF_TOKEN"] + " "
    + sys.argv[-1]
)
"""


def tp(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        trainprof_cmd(*args),
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        errors="surrogateescape",
        timeout=240,
    )


def no_trainprof_traceback(p: subprocess.CompletedProcess[str]) -> None:
    """trainprof's own failure would say 'a trainprof bug' or show its frames."""
    text = p.stdout + p.stderr
    assert "a trainprof bug" not in text, text[-3000:]
    assert "trainprof/" not in "".join(re.findall(r'File "[^"]*"', text)), text[-3000:]


def assert_one_line(p: subprocess.CompletedProcess[str]) -> None:
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    assert re.fullmatch(r"trainprof: [^\n]+\n", p.stderr), p.stderr[-2000:]


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        self.tags.append(tag)


def check_html(path: Path) -> str:
    text = path.read_text(encoding="utf-8")  # strict: valid UTF-8
    parser = _Tags()
    parser.feed(text)
    assert "script" not in parser.tags  # the page has none; none came from the data
    assert text.count("</style>") == text.count("<style")
    assert "<script" not in text and "\x1b" not in text
    return text


def check_annotations(stdout: str) -> list[str]:
    """Each workflow command: properties escape % CR LF : and ,; the data escapes % CR LF."""
    lines = [line for line in stdout.split("\n") if line.startswith("::")]
    for line in lines:
        assert "\r" not in line and "\x1b" not in line, line
        m = re.fullmatch(r"::(error|warning)( [^:]*)?::(.*)", line)
        assert m, line
        for prop in (m.group(2) or "").strip().split(","):
            if prop:
                key, value = prop.split("=", 1)
                assert re.fullmatch(r"([^%:,]|%25|%0D|%0A|%3A|%2C)*", value), (key, value)
        assert re.fullmatch(r"([^%]|%25|%0D|%0A)*", m.group(3)), m.group(3)
    return lines


def published(paths: list[Path]) -> bytes:
    out = b""
    for path in paths:
        if path.is_dir():
            out += published(sorted(path.iterdir()))
        elif path.is_file():
            out += path.read_bytes()
    return out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("hostile")
    script, bytes_script = tmp / SCRIPT_NAME, tmp / BYTES_SCRIPT_NAME
    script.write_text(JOB.format(loader=LOADER, func=FUNC, hostile=HOSTILE, password=URL_PASSWORD))
    shutil.copy(script, bytes_script)
    env = {**os.environ, "HF_TOKEN": SECRET, "GITHUB_ACTIONS": "true"}
    env["GITHUB_STEP_SUMMARY"] = str(tmp / "summary.md")
    env.pop("GITHUB_WORKSPACE", None)
    out = tmp / "out"
    run = tp(
        "run", "--run-dir", str(tmp / "run"), "--json", str(out / "run.json"),
        "--html", str(out / "run.html"), "--trace", str(out / "run.trace.json"),
        str(script), *ARGS, cwd=tmp, env=env,
    )  # fmt: skip
    ci = tp(
        "ci", "--steps", "100000", "--run-dir", str(tmp / "ci"), "--json", str(out / "ci.json"),
        "--junit", str(out / "ci.xml"), str(bytes_script), *ARGS, cwd=tmp, env=env,
    )  # fmt: skip
    report = tp(
        "report", str(tmp / "run"), "--json", str(out / "report.json"),
        "--html", str(out / "report.html"), "--trace", str(out / "report.trace.json"),
        cwd=tmp, env=env,
    )  # fmt: skip
    compare = tp("compare", str(tmp / "run"), str(out / "ci.json"), cwd=tmp, env=env)
    return {"tmp": tmp, "out": out, "run": run, "ci": ci, "report": report, "compare": compare}


def test_every_command_ends_by_its_contract(corpus: dict[str, Any]) -> None:
    run, ci, report, compare = (corpus[k] for k in ("run", "ci", "report", "compare"))
    assert run.returncode == 1, run.stderr[-3000:]  # the job's own exit code
    assert ci.returncode == 3, ci.stderr[-3000:]  # the job crashed
    assert report.returncode == 0, report.stderr[-3000:]
    assert compare.returncode in (0, 2), compare.stderr[-3000:]
    for p in (run, ci, report, compare):
        no_trainprof_traceback(p)
    assert "\x1b[31mred" not in report.stdout + report.stderr  # trainprof's own output


def test_every_file_is_well_formed_and_keeps_the_hostile_text(corpus: dict[str, Any]) -> None:
    out: Path = corpus["out"]
    for name in ("run.json", "ci.json", "report.json"):
        data = json.loads((out / name).read_text(encoding="utf-8"))
        command = data["run"]["command"]
        # nothing lost: the bytes come back, exactly, from the JSON
        assert command[-6:-4] == [BAD_BYTES, HOSTILE], (name, command)
        assert command[-4:] == ["--max_tokens", "512", "--hf_token", "***"], name
    for name in ("run.trace.json", "report.trace.json"):
        trace = json.loads((out / name).read_text(encoding="utf-8"))
        names = {e.get("name") for e in trace["traceEvents"]}
        assert any(FUNC.split("\n")[0] in str(n) for n in names), name  # py-spy's function
    for name in ("run.html", "report.html"):
        text = check_html(out / name)
        assert "caf\\xe9-\\xff\\xfe" in text  # the argument, its bytes escaped
        assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;/style&gt;" in text
    junit = ET.fromstring((out / "ci.xml").read_bytes())
    command = next(p for p in junit.iter("property") if p.get("name") == "command")
    assert "caf\\xe9-\\xff\\xfe" in command.get("value", "")
    assert any("RuntimeError" in (f.get("message") or "") for f in junit.iter("failure"))
    summary = (corpus["tmp"] / "summary.md").read_text(encoding="utf-8")
    assert "caf\\xe9-\\xff\\xfe" in summary
    assert "<" not in re.sub(r"`[^`\n]*`", "", summary)  # markup only inside code spans


def test_annotations_escape_their_properties_and_data(corpus: dict[str, Any]) -> None:
    lines = check_annotations(corpus["ci"].stdout)
    assert any(line.startswith("::error") and "RuntimeError" in line for line in lines), lines
    crash = next(line for line in lines if "RuntimeError" in line)
    # the job's message, whole: its % and line break escaped, its ESC shown as \x1b
    assert "<script>alert(1)</script></style>\"'::error::x%250A,a:b%0D%0A\\x1b[31mred\\x07" in crash


def test_no_secret_is_published(corpus: dict[str, Any]) -> None:
    tmp: Path = corpus["tmp"]
    everything = published([tmp / "run", tmp / "ci", corpus["out"], tmp / "summary.md"])
    printed = "".join(corpus[k].stdout for k in ("ci", "report", "compare"))
    printed += corpus["report"].stderr + corpus["compare"].stderr
    for secret in (SECRET, URL_PASSWORD):
        assert secret.encode() not in everything, secret
        assert secret not in printed, secret
    assert b"https://bob:***@hub.example" in everything  # masked, not dropped


def test_the_console_shows_the_bytes_escaped(corpus: dict[str, Any]) -> None:
    flat = re.sub(r"[│\s]+", "", corpus["report"].stdout)
    assert "$'caf\\xe9-\\xff\\xfe'" in flat, corpus["report"].stdout[-3000:]


def test_a_ten_megabyte_line_and_message(tmp_path: Path) -> None:
    script = tmp_path / "big.py"
    script.write_text(
        "import sys\nline = '<script>' + 'x' * (10 * 1024 * 1024)\nprint(line)\n"
        "raise ValueError(line)\n"
    )
    out = tmp_path / "out"
    p = tp(
        "run", "-q", "--run-dir", str(tmp_path / "run"), "--json", str(out / "r.json"),
        "--html", str(out / "r.html"), "--trace", str(out / "t.json"), str(script),
        cwd=tmp_path,
    )  # fmt: skip
    assert p.returncode == 1, p.stderr[-2000:]
    no_trainprof_traceback(p)
    report = json.loads((out / "r.json").read_text())
    assert report["run"]["exception"]["type"] == "ValueError"
    json.loads((out / "t.json").read_text())
    check_html(out / "r.html")


# ---- damaged stored files: one line, exit 2 (a baseline is refused before the job starts) ----


def _damaged(good: dict[str, Any]) -> dict[str, str]:
    future = {**good, "schema": "trainprof.report/9"}
    typed = {**good, "summary": {**good["summary"], "steps_per_s": "fast"}, "findings": "x"}
    text = json.dumps(good)
    return {
        "future schema": json.dumps(future),
        "wrongly typed": json.dumps(typed),
        "run not an object": json.dumps({**good, "run": [1]}),
        "truncated": text[: len(text) // 2],
        "nested": '{"schema": "trainprof.report/1", "x": ' + "[" * 10**6 + "]" * 10**6 + "}",
        "not utf-8": text.replace("trainprof", "\udcff", 1).encode("utf-8", "surrogateescape")
        .decode("latin-1"),
    }  # fmt: skip


def test_damaged_reports_through_compare_and_ci(corpus: dict[str, Any], tmp_path: Path) -> None:
    good = json.loads((corpus["out"] / "report.json").read_text())
    marker = tmp_path / "started"
    job = tmp_path / "job.py"
    job.write_text(f"open({str(marker)!r}, 'w').close()\n")
    for label, text in _damaged(good).items():
        bad = tmp_path / f"{label.replace(' ', '-')}.json"
        bad.write_text(text, encoding="latin-1" if label == "not utf-8" else "utf-8")
        p = tp("compare", str(corpus["out"] / "report.json"), str(bad), cwd=tmp_path)
        assert_one_line(p)
        p = tp("ci", "--baseline", str(bad), str(job), cwd=tmp_path)
        assert_one_line(p)
        assert not marker.exists(), label  # refused before the job started


@pytest.mark.parametrize(
    ("meta", "code"),
    [
        ("[" * 10**6 + "]" * 10**6, 2),
        ('{"command": {"a": 1}}', 2),
        ('{"command": "python train.py"}', 2),
        ('{"command": [["x", ["y"]], null, 3]}', 2),
        ('{"command": ["py', 2),
        ('{"command": ["python", "t.py"], "exception": [1], "hang": "x", "stacks": 5,'
         ' "output": {"stdout_bytes": "x"}, "cwd": 5, "wall_s": "long"}', 0),
    ],
    ids=["nested", "command-object", "command-string", "command-nested", "truncated", "typed"],
)  # fmt: skip
def test_damaged_run_json_through_report(
    corpus: dict[str, Any], tmp_path: Path, meta: str, code: int
) -> None:
    run_dir = tmp_path / "copy"
    shutil.copytree(corpus["tmp"] / "run", run_dir)
    (run_dir / "run.json").write_text(meta)
    p = tp(
        "report", str(run_dir), "--json", str(tmp_path / "r.json"),
        "--html", str(tmp_path / "r.html"), cwd=tmp_path,
    )  # fmt: skip
    if code == 2:
        assert_one_line(p)
        assert "run.json cannot be read as a run record" in p.stderr
        return
    # fields of the wrong type are read as unknown: the rest is still reported
    assert p.returncode == 0, p.stderr[-3000:]
    no_trainprof_traceback(p)
    json.loads((tmp_path / "r.json").read_text())
    check_html(tmp_path / "r.html")


# py-spy cannot read a process whose command line is not UTF-8: attach says so in one line.
@pytest.mark.parametrize("args", [ARGS, ARGS[1:]], ids=["bytes", "utf-8"])
def test_attach_to_a_process_with_hostile_arguments(tmp_path: Path, args: tuple[str, ...]) -> None:
    # GIVEN a running process whose script, function and arguments are hostile
    script = tmp_path / SCRIPT_NAME
    script.write_text(
        "import sys, time, types\n"
        "def spin():\n    t = time.monotonic()\n    while time.monotonic() - t < 30:\n"
        "        sum(range(1000))\n"
        f"names = {{k: {FUNC!r} for k in ('co_name', 'co_qualname') if hasattr(spin.__code__, k)}}\n"
        "types.FunctionType(spin.__code__.replace(**names), globals())()\n"
    )
    env = {**os.environ, "HF_TOKEN": SECRET}
    job = subprocess.Popen([sys.executable, str(script), *args], env=env)
    try:
        p = tp(
            "attach", "-q", "--duration", "2", "--run-dir", str(tmp_path / "run"),
            "--json", str(tmp_path / "a.json"), str(job.pid), cwd=tmp_path, env=env,
        )  # fmt: skip
    finally:
        job.kill()
        job.wait()
    # THEN nothing it stored or printed holds the secret or a raw ESC
    no_trainprof_traceback(p)
    assert SECRET not in p.stdout + p.stderr and "\x1b[31m" not in p.stdout + p.stderr
    if BAD_BYTES in args:
        assert_one_line(p)
        assert "py-spy cannot read the Python stacks" in p.stderr
        return
    assert p.returncode == 0, p.stderr[-3000:]
    report = json.loads((tmp_path / "a.json").read_text())
    assert report["run"]["command"][-5] == HOSTILE  # CR LF and all
    assert report["run"]["command"][-1] == "***"
    assert SECRET.encode() not in published([tmp_path / "run", tmp_path / "a.json"])


@pytest.mark.parametrize("command", [("report",), ("compare",), ("rules",), ("ci", "--baseline")])
def test_hostile_paths_and_names_in_error_lines(tmp_path: Path, command: tuple[str, ...]) -> None:
    # a path or rule id that does not exist, holding ESC, a line break and a non-UTF-8 byte
    hostile = "x\x1b[31mred\n<b>" + os.fsdecode(b"\xff")
    after = {"ci": ["job.py"], "compare": ["."]}.get(command[0], [])
    p = tp(*command, hostile, *after, cwd=tmp_path)
    assert p.returncode in (0, 2), p.stderr[-2000:]
    line = p.stderr if p.returncode == 2 else p.stdout
    assert re.fullmatch(r"trainprof: [^\n]+\n", line), line
    assert "x\\x1b[31mred\\n<b>\\" in line and "\x1b" not in line
    assert not re.search("[\ud800-\udfff]", line)  # the byte is written as an escape


# ---- the job's processes and descriptors are its own (issue 50, part 3) ----------------------


def _sh(
    command: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """A shell line (its redirections: ``1>&-``), as a user types it in a terminal."""
    return subprocess.run(
        ["sh", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=240
    )


def _tp_line(*args: str) -> str:
    return " ".join(shlex.quote(a) for a in trainprof_cmd(*args))


def test_a_process_the_job_leaves_in_its_group_outlives_it(tmp_path: Path) -> None:
    """Was: 1 s after the job's exit, SIGTERM then SIGKILL to the whole group: the upload a
    job leaves running (``nohup sh -c ... &``) never happened under trainprof."""
    fifo, marker = tmp_path / "go", tmp_path / "uploaded"
    os.mkfifo(fifo)
    script = tmp_path / "job.py"
    script.write_text(
        "import os, shlex\n"
        "print('trained', flush=True)\n"
        f"os.system('nohup sh -c ' + shlex.quote('read x < {fifo}; echo uploaded > {marker}')"
        " + ' >/dev/null 2>&1 &')\n"
    )
    p = tp(
        "run", "-q", "--no-stacks", "--run-dir", str(tmp_path / "run"), str(script), cwd=tmp_path
    )
    assert p.returncode == 0, p.stderr[-2000:]
    no_trainprof_traceback(p)
    left = json.loads((tmp_path / "run" / "run.json").read_text()).get("outlived") or []
    assert left and "left running, as without trainprof" in p.stderr, p.stderr[-2000:]
    deadline = time.monotonic() + 30
    while True:  # the left process opens the FIFO to read; a killed one never does
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as exc:
            assert exc.errno == errno.ENXIO, exc
            assert any(psutil.pid_exists(pid) for pid in left), "trainprof killed it"
            assert time.monotonic() < deadline
            time.sleep(0.05)
    os.write(fd, b"go\n")
    os.close(fd)
    psutil.wait_procs([psutil.Process(pid) for pid in left if psutil.pid_exists(pid)], timeout=30)
    assert marker.read_text() == "uploaded\n"


FDS_JOB = """\
import os, sys
open_fds = []
for fd in (0, 1, 2):
    try:
        os.fstat(fd)
        open_fds.append(fd)
    except OSError:
        pass
with open(sys.argv[1], "w") as f:
    f.write(repr((open_fds, sys.stdin is None, sys.stdout is None, sys.stderr is None)))
for i in range(3):
    print("line", i)
print("to stderr", file=sys.stderr)
sys.exit(17)
"""


@pytest.mark.parametrize("closed", ["0<&-", "1>&-", "2>&-", "1>&- 2>&-"])
def test_a_closed_standard_descriptor_is_the_jobs_as_without_trainprof(
    tmp_path: Path, closed: str
) -> None:
    """Was: with fd 1 closed the job's first print raised BrokenPipeError (exit 1, no run.json);
    with fd 2 closed the job never started: trainprof's own pipes took those numbers."""
    script = tmp_path / "job.py"
    script.write_text(FDS_JOB)
    plain = _sh(f"exec {shlex.quote(sys.executable)} job.py plain.txt {closed}", tmp_path)
    run_dir = tmp_path / "run"
    line = _tp_line("run", "-q", "--no-stacks", "--run-dir", str(run_dir), "job.py", "tp.txt")
    p = _sh(f"exec {line} {closed}", tmp_path)
    assert plain.returncode == 17 and p.returncode == 17, (p.returncode, p.stderr[-2000:])
    assert (tmp_path / "tp.txt").read_text() == (tmp_path / "plain.txt").read_text()
    assert p.stdout == plain.stdout  # nothing, or the job's three lines
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["exit_code"] == 17
    no_trainprof_traceback(p)


def test_run_with_a_run_dir_from_a_deleted_working_directory(tmp_path: Path) -> None:
    """Was: a traceback (os.getcwd in the runner, then in the probe's bootstrap), no job."""
    script = tmp_path / "job.py"
    script.write_text(FDS_JOB)
    gone = tmp_path / "gone"
    gone.mkdir()
    line = _tp_line(
        "run", "-q", "--run-dir", str(tmp_path / "run"), str(script), str(tmp_path / "tp.txt")
    )
    p = _sh(f"cd gone && rmdir ../gone && exec {line}", tmp_path)
    assert p.returncode == 17, p.stderr[-3000:]
    assert p.stdout == "line 0\nline 1\nline 2\n"
    assert "Error in sitecustomize" not in p.stderr, p.stderr[-3000:]
    no_trainprof_traceback(p)
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert meta["exit_code"] == 17 and meta["cwd"] is None
    assert meta["probe"]["loaded"] is not False, meta["probe"]


# ---- every path option of every command, on an unreadable path: one line, exit 2 -----------

PATH_VALUES = {"PATH", "DIR", "RUN_DIR", "RUN_A", "RUN_B", "COMMAND..."}


def _path_params() -> list[tuple[str, str]]:
    """(command, option or argument name) for each path a command of the CLI takes, read from
    the CLI itself: a new command or option is walked without a change here."""
    import typer

    from trainprof.cli import app

    group = typer.main.get_command(app)
    return [
        (name, p.opts[0])
        for name, command in group.commands.items()  # type: ignore[attr-defined]
        for p in command.params
        if p.metavar in PATH_VALUES
    ]


def _as_another_user() -> list[str]:
    """A prefix under which a mode-000 directory denies trainprof as it denies a user: none
    for a user; for root, a user namespace of its own (root's files stay readable as their
    owner's, but no capability overrides a mode)."""
    if os.geteuid() != 0:
        return []
    probe = subprocess.run(
        ["unshare", "--user", "--", "true"], capture_output=True, check=False
    ) if shutil.which("unshare") else None  # fmt: skip
    if probe is None or probe.returncode != 0:
        pytest.skip("root, and no user namespace to run as a user in")
    return ["unshare", "--user", "--"]


@pytest.fixture(scope="module")
def locked_tree(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("locked")
    (tmp / "job.py").write_text("print('ran')\n")
    good = tmp / "good"
    p = tp("run", "-q", "--no-stacks", "--run-dir", str(good), "job.py", cwd=tmp)
    assert p.returncode == 0, p.stderr[-2000:]
    shutil.copy(good / "report.json", tmp / "good.json")
    locked = tmp / "locked"
    locked.mkdir()
    (locked / "job.py").write_text("print('ran')\n")
    locked.chmod(0)
    yield tmp
    locked.chmod(0o700)


ATTACH = """\
{python} -c "import time; open('ready', 'w').close(); time.sleep(60)" &
while [ ! -e ready ]; do sleep 0.05; done
{trainprof} "$!"
code=$?
kill $!
exit $code
"""


@pytest.mark.parametrize(("command", "param"), _path_params())
def test_every_path_option_on_an_unreadable_path(
    locked_tree: Path, command: str, param: str
) -> None:
    """Was: PermissionError tracebacks (43-51 lines, exit 1) for `run --json locked/r.json`,
    `report locked/run`, `compare locked/a.json good.json`, `ci --baseline locked/b.json`,
    `rules --json locked/r.json`, `doctor --data locked/d` and a script in locked/."""
    positional = {
        "run": {"command": ["job.py"]},
        "ci": {"command": ["job.py"]},
        "tune": {"command": ["job.py"]},
        "report": {"run_dirs": ["good"]},
        "compare": {"a": ["good.json"], "b": ["good.json"]},
    }.get(command, {})
    locked = f"locked/{param.strip('-')}" + ("/job.py" if param == "command" else "")
    options = [param, locked] if param.startswith("-") else []
    args = [
        v for name, values in positional.items() for v in ([locked] if name == param else values)
    ]
    line = trainprof_cmd(command, *options, *args)
    if command == "attach":  # to a Python process of the same user: the path is what is refused
        line = [
            "sh",
            "-c",
            ATTACH.format(python=shlex.quote(sys.executable), trainprof=shlex.join(line)),
        ]
    before = {p.name for p in locked_tree.iterdir()}
    p = subprocess.run(
        [*_as_another_user(), *line], cwd=locked_tree, capture_output=True, text=True, timeout=120
    )
    (locked_tree / "ready").unlink(missing_ok=True)
    if command == "demo":  # its first line says what it runs
        assert p.stderr.startswith("trainprof demo: running"), p.stderr
        p.stderr = p.stderr.split("\n", 1)[1]
    assert_one_line(p)
    no_trainprof_traceback(p)
    assert "locked" in p.stderr and "Permission denied" in p.stderr, p.stderr
    assert "ran\n" not in p.stdout  # refused before the job started
    assert {p.name for p in locked_tree.iterdir()} == before  # no run directory made


# ---- a run directory from elsewhere: only regular files are read, each to its size ----------

HOT = """\
import time
def hot_function():
    return sum(range(300000))
t = time.monotonic()
while time.monotonic() - t < 2.5:
    hot_function()
"""
ONE_GIB = 1 << 30


def _report_within(
    run_dir: Path, *args: str, limit: int = ONE_GIB
) -> subprocess.CompletedProcess[str]:
    """`trainprof report`, its address space held to ``limit`` (a reader that reads without
    end fails fast, and the machine keeps its memory) and 120 s."""
    import resource

    def held() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return subprocess.run(
        trainprof_cmd("report", str(run_dir), *args), cwd=run_dir.parent, capture_output=True,
        text=True, timeout=120, preexec_fn=held,
    )  # fmt: skip


@pytest.fixture(scope="module")
def stacked_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short job's run with its stack samples (py-spy) and its event file."""
    tmp = tmp_path_factory.mktemp("stacked")
    (tmp / "hot.py").write_text(HOT)
    p = tp("run", "-q", "--run-dir", str(tmp / "run"), "hot.py", cwd=tmp)
    assert p.returncode == 0, p.stderr[-2000:]
    assert list((tmp / "run").glob("events-*.tp")) and list((tmp / "run").glob("stacks-*.json.gz"))
    return tmp / "run"


@pytest.mark.parametrize(
    ("pattern", "kind"),
    [
        ("events-*.tp", "/dev/zero"),
        ("events-*.tp", "fifo"),
        ("stacks-*.json.gz", "/dev/zero"),
        ("stdout.log", "fifo"),
        ("samples.jsonl", "/dev/zero"),
    ],
)
def test_a_run_file_that_is_not_a_regular_file_is_skipped_and_said(
    stacked_run: Path, tmp_path: Path, pattern: str, kind: str
) -> None:
    """Was: `trainprof report` on a run whose event file is a symlink to /dev/zero never
    returned (readline of an endless file), nor one whose file is a FIFO (open waits)."""
    run_dir = tmp_path / "run"
    shutil.copytree(stacked_run, run_dir)
    target = next(run_dir.glob(pattern))
    target.unlink()
    if kind == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to(kind)
    p = _report_within(run_dir)
    assert p.returncode == 0, p.stderr[-3000:]
    no_trainprof_traceback(p)
    what = "a FIFO" if kind == "fifo" else "a symlink"
    assert f"not regular files: {target.name} ({what})" in p.stderr, p.stderr


def test_a_stack_file_that_expands_to_600_mb_is_streamed(stacked_run: Path, tmp_path: Path) -> None:
    """Was: json.load of the whole text, 1.27 GB of memory for a gzip that expands to 600 MB."""
    import gzip

    run_dir = tmp_path / "run"
    shutil.copytree(stacked_run, run_dir)
    packed = next(run_dir.glob("stacks-*.json.gz"))
    text = gzip.decompress(packed.read_bytes())
    first = text.index(b"},{") + 2  # after the first event: 600 MB of JSON white space
    with gzip.open(packed, "wb", compresslevel=1) as out:
        out.write(text[:first])
        for _ in range(600):
            out.write(b" " * 1_000_000)
        out.write(text[first:])
    assert packed.stat().st_size < 5_000_000
    p = _report_within(run_dir, "--trace", str(tmp_path / "trace.json"), limit=ONE_GIB // 2)
    assert p.returncode == 0, p.stderr[-3000:]
    no_trainprof_traceback(p)
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert any(e.get("name") == "hot_function" for e in trace["traceEvents"])  # every event read


FDS_RUN_OUT = """\
import torch
from torch.utils.data import DataLoader, Dataset

held = []


class Files(Dataset):
    def __len__(self):
        return 1000

    def __getitem__(self, i):
        held.append(open(__file__))  # until the descriptors run out
        return torch.zeros(2)


for x in DataLoader(Files(), batch_size=4):
    pass
"""


def _traceback_of(stderr: str) -> list[str]:
    lines = stderr.splitlines()
    start = lines.index("Traceback (most recent call last):")
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("OSError"))
    return lines[start : end + 1]


def test_the_jobs_traceback_under_a_low_fd_limit_is_its_own(tmp_path: Path) -> None:
    """Was: under `ulimit -n 20` the traceback gained frames of trainprof/probe/loader.py and
    fetch_timers.py (the excepthook that strips them could not import its module then)."""
    import resource

    (tmp_path / "job.py").write_text(FDS_RUN_OUT)

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (20, 20))

    def run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            cmd, cwd=tmp_path, capture_output=True, text=True, timeout=240, preexec_fn=limited
        )

    plain = run([sys.executable, "job.py"])
    p = run(trainprof_cmd("run", "-q", "--no-stacks", "--run-dir", str(tmp_path / "run"), "job.py"))
    assert plain.returncode == p.returncode == 1, p.stderr[-3000:]
    assert "Too many open files" in plain.stderr
    assert _traceback_of(p.stderr) == _traceback_of(plain.stderr)


def test_a_stack_frame_that_names_a_fifo_is_not_opened(stacked_run: Path, tmp_path: Path) -> None:
    """Was: a stack file naming a FIFO as a frame's source file kept `report` waiting in
    open() for ever (the source line of each frame is read)."""
    import gzip

    run_dir = tmp_path / "run"
    shutil.copytree(stacked_run, run_dir)
    fifo = tmp_path / "source.py"
    os.mkfifo(fifo)
    packed = next(run_dir.glob("stacks-*.json.gz"))
    events = json.loads(gzip.decompress(packed.read_bytes()))
    for event in events:
        if event["name"] == "hot_function":
            event["args"]["filename"] = str(fifo)
    packed.write_bytes(gzip.compress(json.dumps(events).encode()))
    p = _report_within(run_dir, "--trace", str(tmp_path / "trace.json"))
    assert p.returncode == 0, p.stderr[-3000:]
    no_trainprof_traceback(p)
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert any(e.get("name") == "hot_function" for e in trace["traceEvents"])


def test_report_of_the_latest_run_from_a_deleted_working_directory(tmp_path: Path) -> None:
    """Was: a FileNotFoundError traceback (Path.cwd() looking for ./trainprof-runs)."""
    (tmp_path / "gone").mkdir()
    p = _sh(f"cd gone && rmdir ../gone && exec {_tp_line('report')}", tmp_path)
    assert_one_line(p)
    assert "the current directory was deleted" in p.stderr
