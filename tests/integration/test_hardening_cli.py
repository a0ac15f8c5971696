"""The CLI's edges, for real (subprocesses): unwritable places, corrupt run directories,
numeric options, secrets in arguments, file modes, --version/-h, the report contract, and
doctor's rows."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, trainprof_cmd, write_script

pytestmark = [pytest.mark.slow, pytest.mark.parallel]  # judges no timing or load (CONTRIBUTING)
SECRETS = ("sk-live-AAA", "sk-live-BBB", "sk-live-CCC")
SECRET_ARGS = ("--api-key=sk-live-AAA", "--token", "sk-live-BBB", "API_KEY=sk-live-CCC")
IS_ROOT = os.geteuid() == 0
ONE_LINE = re.compile(r"^trainprof: [^\n]+\n?$")


def tp(
    *args: str, cwd: Path | None = None, timeout: float = 120, **kw: Any
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        trainprof_cmd(*args), cwd=cwd, capture_output=True, text=True, timeout=timeout, **kw
    )


def marker_script(tmp: Path) -> tuple[Path, Path]:
    """A job that leaves a file behind: if the file exists, the job was started."""
    marker = tmp / "job-started"
    script = write_script(tmp, "job.py", f"open({str(marker)!r}, 'w').close()\n")
    return script, marker


def assert_one_line(p: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    assert ONE_LINE.match(p.stderr), p.stderr
    for needle in needles:
        assert needle in p.stderr, (needle, p.stderr)


def unwritable_system_dir() -> Path | None:
    """A directory that refuses new entries even to root (sysfs), if this machine has one."""
    for d in (Path("/sys"), Path("/proc")):
        try:
            os.mkdir(d / "trainprof-probe")
        except OSError:
            return d
        os.rmdir(d / "trainprof-probe")
    return None


# ---- 5: unwritable locations: one line, exit 2, the job never starts -----------------------


@pytest.mark.parametrize("under", ["file/run", "file/deeper/run"])
def test_run_dir_under_a_regular_file(tmp_path: Path, under: str) -> None:
    script, marker = marker_script(tmp_path)
    (tmp_path / "file").write_text("x")
    p = tp("run", "-q", "--run-dir", str(tmp_path / under), str(script), cwd=tmp_path)
    assert_one_line(p, "cannot create run directory", str(tmp_path / under))
    assert re.search(r"Not a directory|File exists", p.stderr)
    assert not marker.exists()


def test_run_dir_that_is_a_regular_file(tmp_path: Path) -> None:
    script, marker = marker_script(tmp_path)
    (tmp_path / "taken").write_text("x")
    p = tp("run", "-q", "--run-dir", str(tmp_path / "taken"), str(script), cwd=tmp_path)
    assert_one_line(p, "exists and is not an empty directory")
    assert not marker.exists()


def test_default_run_dir_in_a_read_only_cwd(tmp_path: Path) -> None:
    cwd = unwritable_system_dir()
    if cwd is None:
        pytest.skip("no directory here refuses new entries to this user")
    script, marker = marker_script(tmp_path)
    p = tp("run", "-q", str(script), cwd=cwd)
    assert_one_line(p, f"cannot create run directory {cwd}/trainprof-runs")
    assert not marker.exists()


@pytest.mark.skipif(IS_ROOT, reason="root ignores directory permissions (the sysfs test covers it)")
def test_permission_denied_run_dir_and_json(tmp_path: Path) -> None:
    script, marker = marker_script(tmp_path)
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    p = tp("run", "-q", str(script), cwd=locked)
    assert_one_line(p, "cannot create run directory", "Permission denied")
    p = tp("run", "-q", "--run-dir", str(locked / "r"), str(script), cwd=tmp_path)
    assert_one_line(p, "cannot create run directory", "Permission denied")
    p = tp("run", "-q", "--json", str(locked / "r.json"), str(script), cwd=tmp_path)
    assert_one_line(p, "cannot write --json", "Permission denied")
    assert not marker.exists()


def test_json_that_cannot_be_written(tmp_path: Path) -> None:
    script, marker = marker_script(tmp_path)
    (tmp_path / "file").write_text("x")
    cases = [(tmp_path / "file" / "r.json", "Not a directory")]
    system = unwritable_system_dir()
    if system is not None:
        cases.append((system / "r.json", ""))
    for path, why in cases:
        p = tp("run", "-q", "--json", str(path), str(script), cwd=tmp_path)
        assert_one_line(p, f"cannot write --json {path}", why)
        assert not marker.exists()
        assert not (tmp_path / "trainprof-runs").exists()  # nothing created either


def test_report_and_doctor_json_that_cannot_be_written(
    full_run: dict[str, Any], tmp_path: Path
) -> None:
    (tmp_path / "file").write_text("x")
    bad = tmp_path / "file" / "r.json"
    assert_one_line(tp("report", str(full_run["run_dir"]), "--json", str(bad)), "cannot write")
    system = unwritable_system_dir()
    if system is not None:
        p = tp("doctor", "--json", str(system / "d.json"))
        assert_one_line(p, f"cannot write --json {system}/d.json")
        assert p.stdout == ""  # refused before any check ran


@pytest.mark.skipif(IS_ROOT, reason="root ignores directory permissions (the next test covers it)")
@pytest.mark.parametrize(
    "command",
    [("run", "-q", "--json"), ("run", "-q", "--html"), ("run", "-q", "--trace"),
     ("ci", "--json"), ("ci", "--junit")],
)  # fmt: skip
def test_report_files_into_a_chmod_000_directory(tmp_path: Path, command: tuple[str, ...]) -> None:
    script, marker = marker_script(tmp_path)
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o000)
    p = tp(*command, str(locked / "out" / "f"), str(script), cwd=tmp_path)
    assert_one_line(p, f"cannot write {command[-1]}", "Permission denied")
    assert not marker.exists()


@pytest.mark.parametrize("option", ["--json", "--html", "--trace", "--junit"])
def test_report_files_under_a_regular_file_or_into_a_fifo(tmp_path: Path, option: str) -> None:
    script, marker = marker_script(tmp_path)
    (tmp_path / "file").write_text("x")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # no reader: opening it for writing would block for ever
    command = ("ci",) if option == "--junit" else ("run", "-q")
    p = tp(*command, option, str(tmp_path / "file" / "deep" / "r"), str(script), cwd=tmp_path)
    assert_one_line(p, f"cannot write {option}", f"Not a directory ({tmp_path}/file)")
    p = tp(*command, option, str(fifo), str(script), cwd=tmp_path, timeout=60)
    assert_one_line(p, f"{option} {fifo} is not a regular file")
    assert not marker.exists()


def test_report_refuses_a_fifo_before_reading_the_run(
    full_run: dict[str, Any], tmp_path: Path
) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    p = tp("report", str(full_run["run_dir"]), "--html", str(fifo), timeout=60)
    assert_one_line(p, f"--html {fifo} is not a regular file")


# ---- 7: numeric options are validated before anything starts --------------------------------


@pytest.mark.parametrize(
    "option",
    [
        ("--hang-after", "-5"), ("--hang-after", "0"), ("--hang-after", "nan"),
        ("--timeout", "0"), ("--timeout", "-1"), ("--timeout", "inf"),
        ("--steps", "0"), ("--steps", "-3"),
        ("--interval", "0"), ("--interval", "0.01"), ("--interval", "nan"),
    ],
)  # fmt: skip
def test_run_rejects_out_of_range_numbers(tmp_path: Path, option: tuple[str, str]) -> None:
    script, marker = marker_script(tmp_path)
    p = tp("run", "-q", *option, str(script), cwd=tmp_path)
    assert p.returncode == 2, (option, p.stderr)
    assert "Traceback" not in p.stderr and option[0] in p.stderr
    assert not marker.exists() and not (tmp_path / "trainprof-runs").exists()


@pytest.mark.parametrize(
    "option",
    [("--workers", "-1"), ("--batch-mb", "0"), ("--batch-mb", "nan"), ("--batch-mb", "inf")],
)
def test_doctor_rejects_out_of_range_numbers(option: tuple[str, str]) -> None:
    assert_one_line(tp("doctor", *option), option[0])


# ---- 8, 9, 11: one real run with secrets in its arguments, DataLoader workers and a hang ----

JOB = """\
import sys, time
import torch
from torch.utils.data import DataLoader, TensorDataset

# the job gets its real arguments, whatever trainprof stores
assert sys.argv[1:] == {args!r}, sys.argv
ds = TensorDataset(torch.randn(256, 4), torch.randn(256, 1))
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in DataLoader(ds, batch_size=8, num_workers=1):
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
print("trained", flush=True)
time.sleep(60)  # hangs: the hang watch saves the stacks and stops it
"""


@pytest.fixture(scope="module")
def full_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("full")
    script = write_script(tmp, "train.py", JOB.format(args=list(SECRET_ARGS)))
    run_dir, json_path = tmp / "run", tmp / "out" / "report.json"
    p = tp(
        "run", "-q", "--run-dir", str(run_dir), "--json", str(json_path),
        "--hang-after", "1", "--on-hang", "kill", str(script), *SECRET_ARGS,
        cwd=tmp, umask=0,  # a file created without an explicit mode would show as 0666
    )  # fmt: skip
    assert p.returncode == 124, p.stderr  # stopped by the hang watch (not an assertion error)
    return {"tmp": tmp, "proc": p, "run_dir": run_dir, "json": json_path}


def test_secrets_are_masked_in_everything_stored_and_printed(full_run: dict[str, Any]) -> None:
    run_dir: Path = full_run["run_dir"]
    stored = [*run_dir.iterdir(), full_run["json"]]
    for path in stored:
        data = path.read_bytes()
        for secret in SECRETS:
            assert secret.encode() not in data, (path.name, secret)
    p = full_run["proc"]
    for secret in SECRETS:
        assert secret not in p.stdout + p.stderr
    masked = ["--api-key=***", "--token", "***", "API_KEY=***"]
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["command"][-4:] == masked and meta["redacted"] is True
    report = json.loads(full_run["json"].read_text())
    assert report["run"]["command"][-4:] == masked
    roles = set()
    for events in run_dir.glob("events-*.tp"):
        header = json.loads(events.read_text().splitlines()[0][len("#TP1 ") :])
        roles.add(header["role"])
        assert header["argv"][-4:] == masked, header
    assert {"main", "worker"} <= roles
    assert "--api-key=*** --token *** API_KEY=***" in (run_dir / "hang-stacks.txt").read_text()
    assert "API_KEY=***" in p.stderr  # the printed command


def test_no_redact_stores_the_command_as_given(tmp_path: Path) -> None:
    script = write_script(tmp_path, "t.py", "import sys, torch\nprint(len(sys.argv))\n")
    p = tp(
        "run", "-q", "--no-redact", "--run-dir", str(tmp_path / "r"), str(script), *SECRET_ARGS,
        cwd=tmp_path,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    meta = json.loads((tmp_path / "r" / "run.json").read_text())
    assert meta["command"][-4:] == list(SECRET_ARGS) and meta["redacted"] is False
    (events,) = (tmp_path / "r").glob("events-*.tp")
    assert json.loads(events.read_text().splitlines()[0][5:])["argv"][-4:] == list(SECRET_ARGS)


def test_every_file_trainprof_writes_is_private(full_run: dict[str, Any]) -> None:
    run_dir: Path = full_run["run_dir"]
    assert stat.S_IMODE(run_dir.stat().st_mode) == 0o700
    names = {p.name for p in run_dir.iterdir()}
    expected = {
        "run.json", "report.json", "samples.jsonl", "stdout.log", "stderr.log", "py-spy.log",
        "stacks-0.json.gz", "hang-stacks.txt",
    }  # fmt: skip
    assert expected <= names, names
    assert len([n for n in names if n.startswith("events-")]) >= 2  # main and a worker
    for path in [*run_dir.iterdir(), full_run["json"]]:
        assert path.is_file() and not path.is_symlink(), path
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, (path.name, oct(path.stat().st_mode))


def test_doctor_json_is_private(tmp_path: Path) -> None:
    out = tmp_path / "doctor.json"
    p = tp("doctor", "--json", str(out), umask=0)
    assert p.returncode in (0, 1), p.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert json.loads(out.read_text())["trainprof_version"] == version()


# ---- 6: a corrupt run directory: one line, exit 2 ------------------------------------------


@pytest.mark.parametrize("content", ["", '{"command": ["py', "[]", "null", "\x00garbage"])
def test_report_of_a_corrupt_run_json(
    full_run: dict[str, Any], tmp_path: Path, content: str
) -> None:
    run_dir = tmp_path / "copy"
    shutil.copytree(full_run["run_dir"], run_dir)
    (run_dir / "run.json").write_text(content)
    p = tp("report", str(run_dir))
    assert_one_line(p, f"{run_dir}/run.json cannot be read as a run record")


def test_report_of_damaged_event_and_sample_files(full_run: dict[str, Any], tmp_path: Path) -> None:
    run_dir = tmp_path / "copy"
    shutil.copytree(full_run["run_dir"], run_dir)
    for path in [
        *run_dir.glob("events-*.tp"),
        run_dir / "samples.jsonl",
        run_dir / "stacks-0.json.gz",
    ]:
        data = path.read_bytes()
        path.write_bytes(
            data[: len(data) // 2] + b"\xff\x00garbage\n" + data[len(data) // 2 :][::7]
        )
    p = tp("report", str(run_dir))
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr and "trainprof report" in p.stdout + p.stderr


# ---- 11: --version, -h, trainprof_version, the schema, --json -, report's default --------


def version() -> str:
    """pyproject.toml's version (read by hand: tomllib is 3.11+, trainprof runs on 3.10)."""
    m = re.search(r'^version = "([^"]+)"$', (ROOT / "pyproject.toml").read_text(), re.MULTILINE)
    assert m is not None
    return m.group(1)


def test_version() -> None:
    from trainprof.version import __version__

    assert __version__ == version()
    for flag in ("--version", "-V"):
        p = tp(flag)
        assert p.returncode == 0 and p.stdout == f"trainprof {version()}\n"


@pytest.mark.parametrize(
    "command",
    [
        (),
        ("run",),
        ("report",),
        ("demo",),
        ("doctor",),
        ("rules",),
        ("attach",),
        ("ci",),
        ("compare",),
    ],
)
def test_dash_h_on_every_command(command: tuple[str, ...]) -> None:
    p = tp(*command, "-h")
    assert p.returncode == 0, p.stderr
    assert "Usage" in p.stdout and "--help" in p.stdout
    # an on/off flag takes no value: no type beside it (typer 0.29 prints `--quiet <bool>`)
    assert "<bool>" not in p.stdout, p.stdout


def test_a_ctrl_c_while_trainprof_imports_ends_it_like_one_later(tmp_path: Path) -> None:
    """A Ctrl-C in the third of a second trainprof spends importing typer, rich and its
    commands: exit 130 and nothing on stderr, as typer ends a command interrupted later."""
    entry = (
        "import builtins, sys\n"
        "real_import = builtins.__import__\n"
        "def import_interrupted(name, *args, **kwargs):\n"
        "    if name == 'typer':\n"
        "        raise KeyboardInterrupt\n"
        "    return real_import(name, *args, **kwargs)\n"
        "builtins.__import__ = import_interrupted\n"
        "sys.argv = ['trainprof', 'doctor']\n"
        "from trainprof.console_script import main\n"
        "main()\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", entry], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert (p.returncode, p.stderr, p.stdout) == (130, "", "")


def test_the_command_list_wraps_each_summary_as_one_paragraph() -> None:
    """`trainprof --help` lists each command by its docstring's first paragraph, wrapped to the
    terminal: never broken where the source wraps (rich markup keeps those line breaks)."""
    wide = {**os.environ, "COLUMNS": "250"}
    p = tp("--help", env=wide)
    assert p.returncode == 0, p.stderr
    rows = [line.strip("│ ") for line in p.stdout.splitlines() if line.startswith("│ ")]
    commands = [r for r in rows if r.split(" ", 1)[0] in ("run", "ci", "compare", "doctor")]
    assert len(commands) == 4, rows
    for row in commands:  # at 250 columns each summary fits on its command's own line
        assert row.rstrip().endswith("."), row
    # and a command's own help: prose paragraphs wrap as paragraphs, examples stay lines
    body = tp("run", "--help", env=wide).stdout
    assert "its exit code is trainprof's exit code (killed by signal N" in body, body
    assert re.search(r"\n\s+trainprof run train.py --epochs 3\s*\n", body), body


def test_dash_h_after_the_script_goes_to_the_job(tmp_path: Path) -> None:
    script = write_script(tmp_path, "a.py", "import sys\nprint('job got', sys.argv[1:])\n")
    p = tp("run", "-q", "--run-dir", str(tmp_path / "r"), str(script), "-h", cwd=tmp_path)
    assert p.returncode == 0 and "job got ['-h']" in p.stdout


def test_every_json_file_records_the_version(full_run: dict[str, Any]) -> None:
    run_dir: Path = full_run["run_dir"]
    for path in (run_dir / "run.json", run_dir / "report.json", full_run["json"]):
        assert json.loads(path.read_text())["trainprof_version"] == version(), path
    rules = json.loads(tp("rules", "--json", "-").stdout)
    assert rules["trainprof_version"] == version()


# A validator for the subset of JSON Schema that docs/report.schema.json uses (jsonschema is
# not a dependency): a keyword outside the subset fails, so the schema stays checkable.
ANNOTATIONS = {"$schema", "$id", "$defs", "title", "description"}
TYPES: dict[str, Any] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def check(value: Any, schema: dict[str, Any], root: dict[str, Any], at: str = "$") -> list[str]:
    errors: list[str] = []
    for key, rule in schema.items():
        if key in ANNOTATIONS or key in ("properties", "additionalProperties", "required"):
            continue
        if key == "$ref":
            target = root
            for part in rule.removeprefix("#/").split("/"):
                target = target[part]
            errors += check(value, target, root, at)
        elif key == "type":
            kinds = rule if isinstance(rule, list) else [rule]
            if not any(TYPES[k](value) for k in kinds):
                errors.append(f"{at}: {value!r} is not {rule}")
        elif key == "const":
            if value != rule:
                errors.append(f"{at}: {value!r} != {rule!r}")
        elif key == "enum":
            if value not in rule:
                errors.append(f"{at}: {value!r} not in {rule}")
        elif key == "anyOf":
            if all(check(value, s, root, at) for s in rule):
                errors.append(f"{at}: {value!r} matches none of anyOf")
        elif key == "items":
            if isinstance(value, list):
                for i, item in enumerate(value):
                    errors += check(item, rule, root, f"{at}[{i}]")
        elif key == "propertyNames":
            if isinstance(value, dict):
                for name in value:
                    errors += check(name, rule, root, f"{at} key {name!r}")
        elif key in ("minimum", "maximum"):
            if TYPES["number"](value) and (value < rule if key == "minimum" else value > rule):
                errors.append(f"{at}: {value} beyond {key} {rule}")
        elif key == "pattern":
            if isinstance(value, str) and not re.search(rule, value):
                errors.append(f"{at}: {value!r} does not match {rule}")
        else:
            errors.append(f"schema keyword {key!r} at {at} is outside the checked subset")
    if isinstance(value, dict) and ("properties" in schema or "required" in schema):
        props = schema.get("properties", {})
        errors += [f"{at}: missing {k!r}" for k in schema.get("required", []) if k not in value]
        extra = schema.get("additionalProperties", True)
        for k, v in value.items():
            if k in props:
                errors += check(v, props[k], root, f"{at}.{k}")
            elif extra is False:
                errors.append(f"{at}: unexpected field {k!r}")
            elif isinstance(extra, dict):
                errors += check(v, extra, root, f"{at}.{k}")
    elif isinstance(value, dict) and isinstance(schema.get("additionalProperties"), dict):
        for k, v in value.items():
            errors += check(v, schema["additionalProperties"], root, f"{at}.{k}")
    return errors


SCHEMA_PATH = ROOT / "docs" / "report.schema.json"


def test_schema_names_every_ledger_bucket() -> None:
    from trainprof.analysis.ledger import BUCKETS

    schema = json.loads(SCHEMA_PATH.read_text())
    assert schema["$defs"]["bucket"]["enum"] == list(BUCKETS)
    doc = (ROOT / "docs" / "REPORT.md").read_text()
    finding = schema["$defs"]["finding"]["properties"]
    summary = schema["$defs"]["summary"]["properties"]
    for name in [*schema["properties"], *finding, *(f"summary.{k}" for k in summary)]:
        assert f"`{name}" in doc, f"docs/REPORT.md does not explain {name}"


def test_real_reports_match_the_schema(
    full_run: dict[str, Any], demo_run: subprocess.CompletedProcess[str], tmp_path: Path
) -> None:
    schema = json.loads(SCHEMA_PATH.read_text())
    demo = demo_run  # `trainprof demo --run-dir DIR`, shared with test_run_torch
    assert demo.returncode == 0, demo.stderr
    crash = write_script(tmp_path, "crash.py", "import torch\nraise KeyError('label')\n")
    tp("run", "-q", "--run-dir", str(tmp_path / "crash"), str(crash), cwd=tmp_path)
    plain = write_script(tmp_path, "plain.py", "print(sum(range(1000)))\n")
    tp("run", "-q", "--run-dir", str(tmp_path / "plain"), str(plain), cwd=tmp_path)
    reports = {
        "demo": Path(demo.args[-1]) / "report.json",
        "hang": full_run["json"],
        "crash": tmp_path / "crash" / "report.json",
        "no torch": tmp_path / "plain" / "report.json",
    }
    for name, path in reports.items():
        report = json.loads(path.read_text())
        assert check(report, schema, schema) == [], name
    demo_report = json.loads(reports["demo"].read_text())
    assert demo_report["ledger"] and demo_report["findings"][0]["claims"]
    assert json.loads(reports["crash"].read_text())["run"]["exception"]["type"] == "KeyError"
    # the validator does reject what breaks the contract
    broken = {**demo_report, "summary": {**demo_report["summary"], "steps": "150"}, "x": 1}
    assert len(check(broken, schema, schema)) == 2


def test_json_dash_writes_the_report_to_stdout(full_run: dict[str, Any], tmp_path: Path) -> None:
    p = tp("report", str(full_run["run_dir"]), "--json", "-")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["schema"] == "trainprof.report/1"
    assert "trainprof report" in p.stderr  # the console report moved to stderr
    script = write_script(tmp_path, "out.py", "print('job line')\n")
    p = tp("run", "-q", "--run-dir", str(tmp_path / "r"), "--json", "-", str(script), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    first, _, rest = p.stdout.partition("\n")
    assert first == "job line"  # the job's stdout first, then the report
    assert json.loads(rest)["run"]["exit_code"] == 0
    assert not (tmp_path / "-").exists()


def test_report_without_an_argument_shows_the_latest_run(
    full_run: dict[str, Any], tmp_path: Path
) -> None:
    p = tp("report", cwd=tmp_path)
    assert_one_line(p, "no runs in ./trainprof-runs")
    runs = tmp_path / "trainprof-runs"
    names = ("20260101-120000-old", "20260102-090000-new", "20251231-235959-older")
    for name in names:
        shutil.copytree(full_run["run_dir"], runs / name)
        (runs / name / "report.json").unlink()
    (runs / "20270101-000000-not-a-run").mkdir()  # no run.json: not a run
    p = tp("report", "--json", str(tmp_path / "latest.json"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stderr == "trainprof report: the latest run, trainprof-runs/20260102-090000-new\n"
    assert [n for n in names if (runs / n / "report.json").exists()] == ["20260102-090000-new"]
    assert json.loads((tmp_path / "latest.json").read_text())["schema"] == "trainprof.report/1"


# ---- 12: doctor: ids only on warn and fail rows, one assumed worker count ------------------


def test_doctor_rows_and_assumed_workers(tmp_path: Path) -> None:
    out = tmp_path / "d.json"
    env = {**os.environ, "COLUMNS": "250"}
    # --workers beyond the usable CPUs: the cpu row warns (and names its id); the rest are ok
    p = tp("doctor", "--workers", "999", "--json", str(out), env=env)
    doc = json.loads(out.read_text())
    by_id = {c["id"]: c for c in doc["checks"]}
    assert by_id["cpu-quota"]["status"] == "warn"
    for c in doc["checks"]:
        shown = re.search(rf"\b{re.escape(c['id'])}\b", p.stdout) is not None
        assert shown == (c["status"] != "ok"), (c["id"], c["status"])
    # no --workers: shm and open files assume the count the cpu row recommends
    p = tp("doctor", "--json", str(out), env=env)
    doc = json.loads(out.read_text())
    by_id = {c["id"]: c for c in doc["checks"]}
    advice = re.search(
        r"size num_workers to at most (\d+)", " ".join(by_id["cpu-quota"]["evidence"])
    )
    assert advice is not None
    n = advice.group(1)
    shm = " ".join(by_id["shm-small"]["evidence"])
    nofile = " ".join(by_id["nofile-low"]["evidence"])
    assert f"{n} workers x prefetch" in shm and f"{n} workers x (prefetch" in nofile
    assert "the cpu row's advice" in shm and "the cpu row's advice" in nofile
    assert [int(w) for w in re.findall(r"(\d+) workers x", shm + " " + nofile)] == [int(n)] * 2
    assert "Traceback" not in p.stderr
