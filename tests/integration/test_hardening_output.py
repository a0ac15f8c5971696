"""What a user sees, for real: odd arguments, deep paths, narrow and piped output, `report` to
stdout, NO_COLOR, and the live line from start-up to analysis."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import ROOT, run_trainprof, trainprof_cmd, write_script
from rich.cells import cell_len
from test_terminal import run_on_pty

pytestmark = pytest.mark.parallel  # judges no timing or load (CONTRIBUTING)

SGR = re.compile(r"\x1b\[[0-9;]*m")  # any colour or style
ODD_ARGS = ("data.dirs=[/data/a,/data/b]", "split[train]", "\x1b[31mred")
DEMO = ROOT / "trainprof" / "examples" / "demo_train.py"


def test_brackets_and_escape_bytes_in_arguments(tmp_path: Path) -> None:
    # GIVEN a job run with Hydra overrides, an index in brackets and a raw ESC byte
    script = write_script(tmp_path, "argv.py", "import sys\nprint(len(sys.argv))\n")
    r = run_trainprof(tmp_path, str(script), *ODD_ARGS)
    # THEN the job's exit code stands and the command shows as typed, ESC written \x1b
    assert r.returncode == 0, r.stderr[-2000:]
    assert "MarkupError" not in r.stderr and "Traceback" not in r.stderr
    # the command row breaks between words with a trailing ` \` (copy-paste keeps working)
    flat = re.sub(r"[│\s]+", "", re.sub(r" \\\s*│?\n", " ", r.stderr))
    assert "'data.dirs=[/data/a,/data/b]''split[train]'$'\\x1b[31mred'" in flat
    assert "\x1b" not in r.stderr


SMALL_LOOP = """\
import sys, time
import torch

assert sys.argv[1].encode("utf-8", "surrogateescape") == b"caf\\xe9-\\xff\\xfe"
m = torch.nn.Linear(4, 1)
o = torch.optim.SGD(m.parameters(), lr=0.1)
for _ in range(100000):
    o.zero_grad(); m(torch.randn(8, 4)).sum().backward(); o.step(); time.sleep(0.005)
"""


@pytest.mark.slow
def test_argument_bytes_that_are_not_utf8_through_every_output(tmp_path: Path) -> None:
    # GIVEN a job given an argument whose bytes are not UTF-8 (as Linux allows)
    arg = os.fsdecode(b"caf\xe9-\xff\xfe")
    script = write_script(tmp_path, "train.py", SMALL_LOOP)
    shown = "caf\\xe9-\\xff\\xfe"
    env = {**os.environ, "GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(tmp_path / "s.md")}

    def tp(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "trainprof", *args], cwd=tmp_path, env=env, timeout=120,
            capture_output=True, text=True, errors="surrogateescape",
        )  # fmt: skip

    # WHEN it runs with every output, is reported again, and runs under ci with --junit
    run = tp(
        "run", "--steps", "60", "--run-dir", "r", "--html", "r.html", "--trace", "t.json",
        "--json", "r.json", str(script), arg,
    )  # fmt: skip
    report = tp("report", "r", "--html", "r2.html", "--trace", "t2.json", "--json", "r2.json")
    ci = tp(
        "ci", "--steps", "60", "--run-dir", "c", "--junit", "c.xml", "--json", "c.json",
        str(script), arg,
    )  # fmt: skip
    # THEN each exits 0 and says nothing of a failure
    for p in (run, report, ci):
        assert p.returncode == 0, p.stderr[-3000:]
        assert "trainprof bug" not in p.stderr and "Traceback" not in p.stderr
    # AND every file is well-formed, the argument's bytes escaped where text must be UTF-8
    for name in ("r.json", "r2.json", "c.json"):
        assert json.loads((tmp_path / name).read_text())["run"]["command"][-1] == arg  # lossless
    for name in ("t.json", "t2.json"):
        assert json.loads((tmp_path / name).read_text())["traceEvents"]
    for name in ("r.html", "r2.html"):
        html = (tmp_path / name).read_text(encoding="utf-8")
        assert shown in html and html.rstrip().endswith("</html>")
    junit = ET.fromstring((tmp_path / "c.xml").read_bytes())
    assert any(shown in (p.get("value") or "") for p in junit.iter("property"))
    assert shown in (tmp_path / "s.md").read_text(encoding="utf-8")
    # AND the terminal shows it as bash would paste it back
    assert f"$'{shown}'" in re.sub(r"[│\s]+", "", run.stderr + report.stdout)


def test_report_reprints_to_stdout_with_the_command_the_run_gave(tmp_path: Path) -> None:
    script = write_script(tmp_path, "job.py", "print('hello')\n")
    r = run_trainprof(tmp_path, str(script))
    # THEN the run ends naming the command that prints the report again
    hint = r.stderr.strip().splitlines()[-1]
    assert hint == f"report again: trainprof report {r.run_dir.name}", r.stderr[-500:]
    # WHEN the user runs it, from where the job ran, with stdout to a file
    proc = subprocess.run(
        trainprof_cmd(*hint.split(": ", 1)[1].split()[1:]),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    # THEN the report is on stdout, and stderr stays empty
    assert proc.returncode == 0, proc.stderr
    assert "trainprof report" in proc.stdout and "findings" in proc.stdout
    assert proc.stderr == ""


@pytest.mark.slow
def test_where_keeps_file_and_line_in_piped_output(tmp_path: Path) -> None:
    # GIVEN the demo as an installed trainprof holds it (deep in site-packages), run from
    # another directory, with stderr piped (80 columns unless COLUMNS says otherwise)
    deep = tmp_path / "venv/lib/python3.11/site-packages/trainprof/examples"
    deep.mkdir(parents=True)
    shutil.copy(DEMO, deep / "demo_train.py")
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    r = run_trainprof(work, str(deep / "demo_train.py"), cwd=work, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    # AND the same run reported again with COLUMNS=160, piped (the console `trainprof run`
    # ends with, rendered by the same code: one job for both widths)
    wide = subprocess.run(
        trainprof_cmd("report", str(r.run_dir)),
        cwd=work,
        env={**env, "COLUMNS": "160"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert wide.returncode == 0, wide.stderr[-3000:]
    for width, console in ((80, r.stderr), (160, wide.stdout)):
        lines = console.splitlines()
        # THEN every where: line holds its file:line whole; nothing is cut with an ellipsis
        wheres = [line for line in lines if "where:" in line]
        assert wheres, console
        for line in wheres:
            assert re.search(r"where: \S*demo_train\.py:\d+", line), line
        assert not re.search(r"\S…[│ ]", console), console  # no word cut short at a box edge
        # AND the boxes share one width, within the terminal's
        tops = [line for line in lines if line.startswith("╭")]
        assert len(tops) >= 2 and len({cell_len(t) for t in tops}) == 1, tops
        assert max(cell_len(line) for line in lines if line.startswith("│")) <= width


SLOW_START = """
import time
time.sleep(1.5)  # imports, data set-up: before the first step
import torch
m = torch.nn.Linear(4, 1); o = torch.optim.SGD(m.parameters(), lr=0.1)
t = time.monotonic()
while time.monotonic() - t < 3.0:
    o.zero_grad(); m(torch.randn(8, 4)).sum().backward(); o.step(); time.sleep(0.02)
print("done", flush=True)
"""

# trainprof itself, with an analysis that takes 1.2 s (a long run's), as a real process
SLOW_ANALYSIS = (
    "import sys, time, trainprof.analysis.pipeline as p; a = p.analyze; "
    "p.analyze = lambda s: (time.sleep(1.2), a(s))[1]; "
    "from trainprof.cli import app; app(sys.argv[1:], prog_name='trainprof')"
)


@pytest.mark.slow
def test_live_line_on_a_terminal_under_no_color(tmp_path: Path) -> None:
    script = write_script(tmp_path, "slow_start.py", SLOW_START)
    env = dict(os.environ, NO_COLOR="1")
    chunks: list[tuple[float, bytes]] = []
    cmd = [sys.executable, "-c", SLOW_ANALYSIS, "run", "--run-dir", str(tmp_path / "r")]
    code, text = run_on_pty([*cmd, str(script)], tmp_path, env=env, columns=80, chunks=chunks)
    assert code == 0, text[-3000:]
    # THEN no styling at all: not the report's, not the live line's dim
    assert not SGR.search(text), repr(SGR.findall(text)[:5])
    draws = [d for d in text.split("\r\x1b[K") if d.startswith("trainprof ")]
    # AND "starting…" until the first step, then steps
    assert draws[0].startswith("trainprof 0:0") and "starting…" in draws[0], draws[:3]
    assert any("steps " in d for d in draws)
    # AND fields fit the 80 columns whole
    assert all(len(d.split("\n")[0]) < 80 for d in draws)
    # AND redrawn at least twice a second, with a new step count about twice a second
    times = [t for t, c in chunks if b"\r\x1b[Ktrainprof " in c]
    assert len(times) >= 2 * (times[-1] - times[0]), (len(times), times[-1] - times[0])
    changes: list[tuple[float, int]] = []
    for t, c in chunks:
        for n in re.findall(rb"\r\x1b\[Ktrainprof [0-9:]+ \xc2\xb7 steps (\d+)", c):
            if not changes or changes[-1][1] != int(n):
                changes.append((t, int(n)))
    span = changes[-2][0] - changes[0][0]  # the last change may be the job's final flush
    assert len(changes) >= 4 and (len(changes) - 2) / span >= 1.5, changes
    # AND "analysing…" while the (slow) analysis runs, erased before the report
    at = text.index("analysing…")
    assert "\r\x1b[K" in text[at:] and text.index("trainprof report") > at
    assert "analysing…" not in text[text.index("trainprof report") :]


def test_no_color_flag_drops_every_style_on_a_terminal(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    _code, styled = run_on_pty(trainprof_cmd("rules"), tmp_path, env=env, columns=100)
    assert SGR.search(styled), "a terminal gets styles by default"
    code, plain = run_on_pty(trainprof_cmd("--no-color", "rules"), tmp_path, env=env, columns=100)
    assert code == 0 and "fake-batching" in plain
    assert not SGR.search(plain), repr(SGR.findall(plain)[:5])
    # also after the command's name, where people write it (it was "No such option")
    code, after = run_on_pty(trainprof_cmd("rules", "--no-color"), tmp_path, env=env, columns=100)
    assert code == 0 and "fake-batching" in after
    assert not SGR.search(after), repr(SGR.findall(after)[:5])
