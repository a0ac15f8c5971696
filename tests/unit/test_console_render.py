"""The console report and the live line as a user reads them: user text is literal, the
file:line of a finding is never cut, boxes line up, words and units are right."""

from __future__ import annotations

import os
import re
import time
from typing import Any

import pytest
from rich.cells import cell_len
from rich.console import Console
from synth import process, session

from trainprof.analysis.findings import Finding, Verdict
from trainprof.analysis.pipeline import analyze
from trainprof.collect.live import LiveView
from trainprof.collect.output import TerminalLock
from trainprof.render import console as console_render
from trainprof.render.json_report import _located
from trainprof.render.text import clean, make_console, shell_join
from trainprof.units import fmt_bytes, plural

DEEP = "/opt/conda/envs/train/lib/python3.11/site-packages/trainprof/examples/demo_train.py"
HYDRA = ["python", "train.py", "data.dirs=[/data/a,/data/b]", "split[train]", "\x1b[31mred"]


def render(meta: dict[str, Any], verdict: Verdict, width: int, n_steps: int = 30) -> str:
    sess = session(process(n_steps), **meta)
    metrics, _ = analyze(sess)
    console = Console(width=width, record=True, color_system=None, file=open(os.devnull, "w"))
    console_render.render(console, sess.meta, metrics, verdict)
    return console.export_text()


def unboxed(text: str) -> str:
    """The report's words with the box drawing and the line breaks taken out."""
    return re.sub(r"[│╭╮╰╯─\s]+", "", text)


def finding(**kw: Any) -> Finding:
    base: dict[str, Any] = dict(id="fake-batching", severity="warning", title="Fake batching")
    return Finding(**{**base, **kw})


# Item 4: user and job text is literal -------------------------------------------------------


def test_command_with_brackets_and_escapes_is_shown_literally() -> None:
    # GIVEN Hydra overrides, an index in brackets and a raw ESC byte in the command
    out = render({"command": HYDRA}, Verdict(), width=100)
    # THEN they show as typed (no MarkupError, no `split` for `split[train]`), the ESC as \x1b
    flat = unboxed(out)
    assert "'data.dirs=[/data/a,/data/b]'" in flat and "'split[train]'" in flat
    assert "$'\\x1b[31mred'" in flat
    assert "\x1b" not in out


def test_finding_text_is_never_markup_nor_control_bytes() -> None:
    f = finding(
        title="Crash: KeyError [bold]x[/bold]",
        evidence=("message: [/data/a] \x1b]0;pwned\x07 \u202etxt.exe",),
        fix=("set cfg[train]",),
    )
    out = render({}, Verdict((f,)), width=100)
    assert "KeyError [bold]x[/bold]" in out and "[/data/a]" in out and "cfg[train]" in out
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "\\x1b]0;pwned\\x07" in out and "\\u202e" in out


def test_shell_join_pastes_back_as_the_same_command() -> None:
    assert shell_join(["a b", "x[1]", "\x1bq'"]) == "'a b' 'x[1]' $'\\x1bq\\''"
    assert clean("a\tb\nc\rd\x7f") == "a\\tb\\nc\\rd\\x7f"


# Item 10: wrap, never crop; same widths -----------------------------------------------------


@pytest.mark.parametrize("width", [50, 80, 120, 160])
def test_where_keeps_its_file_and_line_at_any_width(width: int) -> None:
    f = finding(where=f"{DEEP}:46 (main)", hotspot=f"{DEEP}:29 (SlowImages.__getitem__)")
    out = render({"cwd": "/home/u/proj"}, Verdict((f,)), width=width)
    where = next(line for line in out.splitlines() if "where:" in line)
    # THEN the file:line is on the where line, whole; a long path loses leading dirs instead
    assert "demo_train.py:46" in where
    assert "demo_train.py:29" in out.replace("│", "")
    assert "…" not in where or "…/" in where  # an ellipsis only ever replaces directories
    if width >= 120:
        assert f"where: {DEEP}:46" in where  # room: the whole path
    if width == 80:
        assert re.search(r"where: …/[^ ]*/site-packages/trainprof/examples/demo_train.py:46", where)


def test_where_under_the_jobs_directory_is_relative() -> None:
    f = finding(where="/home/u/proj/src/train.py:12 (main)")
    out = render({"cwd": "/home/u/proj"}, Verdict((f,)), width=80)
    assert "where: src/train.py:12 (main)" in out


def test_long_evidence_fix_and_command_fold_and_keep_every_character() -> None:
    token = "x" * 150
    f = finding(evidence=(f"evidence {token}end",), fix=(f"fix {token}end",))
    out = render({"command": ["python", "train.py", token + "cmd"]}, Verdict((f,)), width=80)
    flat = unboxed(out)
    assert f"evidence{token}end" in flat.replace("•", "")
    assert f"{token}cmd" in flat and "…" not in out


@pytest.mark.parametrize("width", [60, 80, 160])
def test_the_three_boxes_have_one_width(width: int) -> None:
    f = finding(where=f"{DEEP}:46 (main)", evidence=("short",))
    out = render({}, Verdict((f,)), width=width, n_steps=40)
    tops = [line for line in out.splitlines() if line.startswith("╭")]
    assert len({cell_len(t) for t in tops}) == 1 and len(tops) >= 2
    assert all(cell_len(line) <= width for line in out.splitlines())


def test_report_names_the_command_that_prints_it_again() -> None:
    hint = console_render.rerender_hint({"run_dir": "/w/trainprof-runs/x y", "cwd": "/w"})
    assert hint is not None and hint.plain == "report again: trainprof report 'trainprof-runs/x y'"


# Item 14: words and units --------------------------------------------------------------------


def test_counts_and_units() -> None:
    assert plural(1, "batch") == "1 batch" and plural(2, "batch") == "2 batches"
    assert plural(1, "optimizer step") == "1 optimizer step" and plural(0, "step") == "0 steps"
    assert plural(83, "epoch") == "83 epochs" and plural(2, "process") == "2 processes"
    assert fmt_bytes(512) == "512 B" and fmt_bytes(3 * 2**20) == "3.0 MiB"
    assert fmt_bytes(31 * 2**30) == "31.0 GiB" and fmt_bytes(None) == "—"


def test_one_step_and_batch_units_in_the_summary() -> None:
    out = render({}, Verdict(), width=100, n_steps=1)
    assert re.search(r"steps  1 optimizer step\s", out) and "1 optimizer steps" not in out
    # a job without an optimizer counts batches: "1 batch", "not enough batches", never "batchs"
    log = process(0, loader=None)
    log.add_line("B 1000000 1000 0 8")
    sess = session(log)
    metrics, _ = analyze(sess)
    console = Console(width=100, record=True, color_system=None, file=open(os.devnull, "w"))
    console_render.render(console, sess.meta, metrics, Verdict())
    out = console.export_text()
    assert "1 batch (no optimizer step seen)" in out and "not enough batches" in out
    assert "batchs" not in out


def test_a_hand_written_loop_counts_backward_passes_as_its_steps() -> None:
    """Neither an optimizer step nor a DataLoader batch: each backward() return is the step (a
    torn record is skipped); unmeasured numbers say so."""
    log = process(0, loader=None)
    for i in range(1, 41):
        log.add_line(f"K {2_000_000 + i * 50_000}")
    log.add_line("K 2x")  # torn by a kill
    sess = session(log)
    metrics, _ = analyze(sess)
    assert (metrics.unit, metrics.total_steps, log.bad_lines) == ("backward pass", 40, 1)
    assert metrics.steady is not None and metrics.steady.steps_per_s == pytest.approx(20.0)
    assert metrics.steady.samples_per_s is None and metrics.steady.data_wait_frac is None
    console = Console(width=200, record=True, color_system=None, file=open(os.devnull, "w"))
    console_render.render(console, sess.meta, metrics, Verdict())
    out = console.export_text()
    assert "40 backward passes (no optimizer step or DataLoader batch seen)" in out
    assert "to the first backward pass" in out and "samples/s unknown (no DataLoader" in out


@pytest.mark.parametrize(
    ("n_steps", "note"),
    [
        (30, "No problems found. ✓"),  # 3 s of steady steps: judged, and nothing was wrong
        (0, "Not judged: no training step was seen."),
        (4, "No problem found, but too few steps to judge a steady state (4 seen)"),
    ],
)
def test_no_finding_is_an_all_clear_only_where_the_rules_had_steps_to_judge(
    n_steps: int, note: str
) -> None:
    """A job whose steps trainprof did not see (a hand-written update instead of torch.optim,
    no DataLoader), or saw too few of, was not judged: the report says so, never "no problems"."""
    out = " ".join(render({}, Verdict(), width=300, n_steps=n_steps).split())
    assert note in out, out
    if n_steps < 30:
        assert "No problems found" not in out


@pytest.mark.parametrize(
    ("n_steps", "meta", "note"),
    [
        (0, {"exit_code": 1}, "Not judged: the job failed before its first step"),
        (30, {"exit_code": 1}, "No performance problem in the steps before the job failed"),
        (30, {"exit_code": 137, "signal": "SIGKILL"}, "a kill loses up to its last 0.5 s"),
        (30, {"exit_code": 0, "stopped_by": "timeout"}, "before --timeout stopped the job"),
    ],
)
def test_a_job_that_did_not_finish_cleanly_is_told_by_how_it_ended(
    n_steps: int, meta: dict[str, Any], note: str
) -> None:
    """A job that raised before training said "a kill loses up to its last 0.5 s of records"
    of a job nobody killed."""
    out = " ".join(render(meta, Verdict(), width=300, n_steps=n_steps).split())
    assert note in out, out


def test_doctor_formats_bytes_with_the_same_function() -> None:
    from trainprof.doctor.base import fmt_bytes as doctor_bytes

    assert doctor_bytes(5 * 2**30) == fmt_bytes(5 * 2**30) == "5.0 GiB"


def test_run_report_and_doctor_count_usable_cpus_the_same_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from trainprof.collect import runner
    from trainprof.doctor import cgroup, cpu

    # GIVEN a cgroup quota of half a CPU (docker --cpus 0.5), whatever the affinity mask
    limits = cgroup.CgroupLimits(2, 0.5, "/sys/fs/cgroup/cpu.max", None, None, None)
    monkeypatch.setattr(cgroup, "limits_of", lambda pid, root=None: limits)
    doctor = cpu.usable_cpus(cpu.gather_cpu(0.5, "/sys/fs/cgroup/cpu.max"))
    # THEN the run report counts, for the job's pid, what doctor counts: the quota, rounded up
    assert runner.usable_cpus(os.getpid()) == doctor == 1


# Item 13: the live line --------------------------------------------------------------------


class PipeTerminal:
    """A LiveView drawing into a pipe, as it would draw on a terminal."""

    def __init__(self) -> None:
        self.r, self.w = os.pipe()
        os.set_blocking(self.r, False)
        self.view = LiveView("/nonexistent", TerminalLock(), self.w)

    def read(self) -> str:
        try:
            return os.read(self.r, 65536).decode()
        except BlockingIOError:
            return ""


def feed_steps(view: LiveView, n: int) -> None:
    header = {"pid": 1, "t0": 0.0, "role": "main"}
    for i in range(1, n + 1):
        view.stats.feed(header, f"S {i * 100000} 100000 20000 0 8 1 8")
    view.latest_sample = {
        "procs": [{"cpu": 180.0, "rss": 300 * 2**20}],
        "gpu": [{"util": 97}],
    }


def test_live_line_says_starting_until_the_first_step() -> None:
    view = LiveView("/nonexistent", None, 2)
    assert view.status_text(1.0) == "trainprof 0:01 · starting…"
    feed_steps(view, 1)
    assert "steps 1" in view.status_text(2.0) and "starting" not in view.status_text(2.0)


def test_live_line_of_a_job_without_the_probe_does_not_say_starting() -> None:
    view = LiveView("/nonexistent", None, 2)
    view.no_probe = True  # the runner's ProbeWatch said no process of the job loaded it
    assert view.status_text(600.0) == "trainprof 10:00 · no probe: host metrics only"


def test_live_line_drops_whole_fields_never_half_a_number() -> None:
    view = LiveView("/nonexistent", None, 2)
    feed_steps(view, 50)
    full = [p for _rank, p in view.status_fields(65.0)]
    assert "RSS 300.0 MiB" in full and "GPU 97%" in full
    for width in range(0, 130):
        text = view.status_text(65.0, width)
        assert len(text) <= width
        shown = text.split(" · ") if text else []
        assert all(p in full for p in shown), (width, text)
    assert view.status_text(65.0, 16) == "steps 50"  # the step count goes last


def test_live_line_has_no_styling_under_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    term = PipeTerminal()
    term.view.draw(3.0)
    assert "\x1b[2m" in term.read()
    monkeypatch.setenv("NO_COLOR", "1")
    term.view.draw(3.0)
    drawn = term.read()
    assert "starting…" in drawn and not re.search(r"\x1b\[[0-9;]*m", drawn)


def test_console_has_no_styling_under_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    console = make_console()
    console.force_terminal = True  # as on a terminal
    with console.capture() as cap:
        console.print(console_render.literal("x", style="bold magenta"))
    assert cap.get() == "x\n"


def test_analysing_shows_only_when_analysis_is_slow() -> None:
    term = PipeTerminal()
    with term.view.busy("analysing…", time.monotonic(), after_s=0.5):
        time.sleep(0.1)
    assert term.read() == ""  # quick: nothing drawn
    with term.view.busy("analysing…", time.monotonic(), after_s=0.5):
        time.sleep(0.8)
    drawn = term.read()
    assert "analysing…" in drawn and drawn.endswith("\r\x1b[K")  # drawn, then erased
    # the half second counts from the job's end: a slow load before it counts too
    with term.view.busy("analysing…", time.monotonic(), since=time.monotonic() - 1.0):
        time.sleep(0.1)
    assert "analysing…" in term.read()


def test_cpu_and_memory_not_sampled_say_so() -> None:
    """A job that ended before the first host sample (`trainprof run -- false`): CPU and peak
    memory say they were not measured, never a dash or a zero."""
    out = render({}, Verdict(), width=120)
    assert re.search(r"CPU  not measured: no host sample was taken while the job ran", out)
    assert re.search(r"peak memory  not measured: no host sample was taken while the job ran", out)
    assert "— RSS" not in out


def test_the_json_report_shows_paths_as_the_console_does() -> None:
    f = finding(
        where="/home/u/proj/train.py:12 (main)",
        evidence=("it runs in the training loop itself, at /home/u/proj/train.py:12",),
        fix=("see /opt/lib/x.py:3",),
    )
    shown = _located(f.to_json(), "/home/u/proj")
    assert shown["where"] == "train.py:12 (main)"
    assert shown["evidence"] == ["it runs in the training loop itself, at train.py:12"]
    assert shown["fix"] == ["see /opt/lib/x.py:3"]  # outside the job's directory: absolute
