"""`trainprof ci`: run the job as `trainprof run` does, then judge it with gates and set the
exit code a CI pipeline acts on (thin: parse, run, evaluate, render)."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from trainprof.commands.options import JobRunDir, NoColor, Quiet, Verbose, refuse_stray_option
from trainprof.commands.run import positive_seconds
from trainprof.errors import TrainprofError
from trainprof.render.text import make_console, shell_join
from trainprof.runner import RunOptions
from trainprof.runner import run as run_job
from trainprof.store import rundir

# The reports' loaders and renderers and the gates load the analysis: imported where used, so
# that every other command's start does not pay for them.
if TYPE_CHECKING:
    from trainprof.compare.windows import Window
    from trainprof.gate.gates import GateOptions, Verdict
    from trainprof.store.session import Session

MAX_REPEAT = 20
STEPS_MIN_S = 2.0  # the least run after the first step: warm-up plus MIN_STEADY_S, with room


def _check_share(value: float | None) -> float | None:
    if value is not None and not (0.0 <= value <= 1.0):
        raise typer.BadParameter(f"{value:g} is not a share between 0 and 1 (0.2 = 20%)")
    return value


def _check_tolerance(value: float) -> float:
    if not (math.isfinite(value) and 0.0 <= value < 1.0):
        raise typer.BadParameter(f"{value:g} is not a tolerance in [0, 1) (0.10 = a 10% drop)")
    return value


def _check_positive(value: float | None) -> float | None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise typer.BadParameter(f"{value:g} is not a positive number")
    return value


def _check_percent(value: float | None) -> float | None:
    if value is not None and not (0.0 <= value <= 100.0):
        raise typer.BadParameter(f"{value:g} is not a percentage between 0 and 100")
    return value


def ci(
    ctx: typer.Context,
    command: Annotated[
        list[str],
        typer.Argument(
            help="The script and its arguments (train.py --epochs 3), or `-- <any command>`.",
            show_default=False,
        ),
    ],
    steps: Annotated[
        int,
        typer.Option(
            min=1,
            help="Steps to run (per window with --repeat), then stop: optimizer steps; in a job "
            "without a torch optimizer, DataLoader batches, or else backward() calls. A fast "
            "job runs on until its steps span 2 s, so the rules have a steady state to judge.",
        ),
    ] = 50,
    timeout: Annotated[
        float,
        typer.Option(
            callback=positive_seconds,
            help="Stop the job after this many seconds; a hang (no step for --hang-after) stops "
            "it sooner. Either exits 3.",
        ),
    ] = 600.0,
    hang_after: Annotated[
        float | None,
        typer.Option(
            callback=positive_seconds,
            help="Seconds without a step that count as a hang (default: max(10, 20 median "
            "steps)); a silence whose stacks move or that reads or writes (an evaluation, a "
            "checkpoint) is work, not a hang.",
        ),
    ] = None,
    fail_on: Annotated[
        str,
        typer.Option(help="The lowest finding severity that fails the build: error or warning."),
    ] = "error",
    allow: Annotated[
        list[str] | None,
        typer.Option(
            metavar="ID",
            help="A finding id that never fails the build (repeatable): a known, accepted issue.",
        ),
    ] = None,
    min_samples_per_s: Annotated[
        float | None,
        typer.Option(
            callback=_check_positive, help="Fail below this steady throughput (samples/s)."
        ),
    ] = None,
    max_data_wait: Annotated[
        float | None,
        typer.Option(
            callback=_check_share,
            help="Fail when the loop waits for data more than this share of step time (0.2 = 20%).",
        ),
    ] = None,
    max_step_p95: Annotated[
        float | None,
        typer.Option(
            callback=_check_positive, help="Fail when the steady p95 step time exceeds S seconds."
        ),
    ] = None,
    max_peak_rss: Annotated[
        str | None,
        typer.Option(
            metavar="SIZE",
            help="Fail when the job and its workers together peak above SIZE of resident memory: "
            "8GB (10^9 bytes), 8GiB (2^30), 512M, 1.5G.",
        ),
    ] = None,
    min_gpu_util: Annotated[
        float | None,
        typer.Option(
            callback=_check_percent,
            help="Fail below this mean GPU utilization, percent. Without a GPU it is not "
            "measured, and that fails too.",
        ),
    ] = None,
    baseline: Annotated[
        Path | None,
        typer.Option(
            help="A stored report (`trainprof ci --json` or `trainprof run --json` file, or a run "
            "directory): fail when samples/s drops more than --tolerance below it. A changed "
            "batch size, world size, device or precision is reported as not comparable (fails).",
        ),
    ] = None,
    tolerance: Annotated[
        float,
        typer.Option(
            callback=_check_tolerance,
            help="The samples/s drop the baseline gate accepts (0.10 = 10%).",
        ),
    ] = 0.10,
    repeat: Annotated[
        int,
        typer.Option(
            min=1,
            max=MAX_REPEAT,
            help="Measure K windows: run K x --steps steps, split the steady ones into K "
            "consecutive windows, gate on their median samples/s, and show the spread.",
        ),
    ] = 1,
    junit: Annotated[
        Path | None,
        typer.Option(help="Write JUnit XML here: one testcase per gate (GitHub, GitLab, Jenkins)."),
    ] = None,
    json_path: Annotated[
        Path | None,
        typer.Option(
            "--json",
            help="Write the report with the gates and windows (`ci`) here; it can be the next "
            "run's --baseline.",
        ),
    ] = None,
    run_dir: JobRunDir = None,
    quiet: Quiet = False,
    verbose: Verbose = False,
    no_color: NoColor = False,
) -> None:
    """Run a training job for a few steps as a CI smoke check and fail the build on a crash, a
    hang, a finding, a threshold or a throughput regression.

    Prints the report and a gate table (stderr). With GITHUB_ACTIONS=true, findings become
    annotations at your file:line; with GITHUB_STEP_SUMMARY set, a Markdown summary is
    appended to it.

    Exit codes: 0 every gate passed · 1 a gate failed (or could not measure what it checks) ·
    2 usage error · 3 the job crashed or hung (its own exit code is in the report).

    Examples:

      trainprof ci train.py --epochs 1

      trainprof ci --steps 30 --max-data-wait 0.2 --junit ci.xml train.py

      trainprof ci --repeat 3 --baseline baseline.json --json current.json train.py
    """
    refuse_stray_option(ctx, command)
    opts = _gate_options(
        fail_on,
        allow or [],
        min_samples_per_s,
        max_data_wait,
        max_step_p95,
        max_peak_rss,
        min_gpu_util,
        baseline,
        tolerance,
        repeat,
    )
    for option, path in (("--junit", junit), ("--json", json_path)):
        if path is not None:
            rundir.check_user_file(path, option)
    captured: dict[str, Any] = {}

    def keep(session: Session, data: dict[str, Any]) -> None:
        captured.update(session=session, data=data)

    job_code = run_job(
        RunOptions(
            command=list(command),
            run_dir=run_dir,
            steps=steps * repeat,
            # A fast job's N steps can be over before the rules could judge a steady state
            # (MIN_STEADY_S): it then runs on, past N, until that much time has passed.
            steps_min_s=STEPS_MIN_S,
            timeout_s=timeout,
            quiet=quiet,
            verbose=verbose,
            on_hang="kill",
            hang_after_s=hang_after,
            on_report=keep,
        )
    )
    if "data" not in captured:  # run() always reports; this guards the contract
        raise TrainprofError("the run ended without a report; nothing to judge", exit_code=3)
    from trainprof.compare.windows import step_windows
    from trainprof.gate.gates import evaluate
    from trainprof.gate.render import render_gates

    data: dict[str, Any] = captured["data"]
    session: Session = captured["session"]
    warmup = (data.get("summary") or {}).get("warmup_steps_excluded") or 0
    windows = step_windows(session, warmup, repeat)
    verdict = evaluate(data, windows, opts)
    data["ci"] = {
        "exit_code": verdict.exit_code,
        "job_exit_code": job_code,
        "steps": steps,
        "repeat": repeat,
        "windows": [w.to_json() for w in windows],
        "fail_on": fail_on,
        "allow": sorted(opts.allow),
        "baseline": str(baseline) if baseline is not None else None,
        "tolerance": tolerance if baseline is not None else None,
        "gates": [g.to_json() for g in verdict.gates],
    }
    render_gates(make_console(stderr=True), verdict, _spread_line(windows), session.meta.get("cwd"))
    _write_outputs(verdict, data, junit, json_path)
    raise typer.Exit(verdict.exit_code)


def _spread_line(windows: list[Window]) -> str | None:
    """The windows' throughput, median and spread: samples/s, or it/s where no batch size was
    recorded (a loop without a DataLoader)."""
    from trainprof.compare.windows import spread

    if len(windows) < 2:
        return None
    rates = spread([w.samples_per_s for w in windows])
    if rates is not None:
        return rates.describe(unit=" samples/s")
    steps = spread([w.steps_per_s for w in windows])
    return steps.describe(unit=" it/s") if steps is not None else None


def _gate_options(
    fail_on: str,
    allow: list[str],
    min_samples_per_s: float | None,
    max_data_wait: float | None,
    max_step_p95: float | None,
    max_peak_rss: str | None,
    min_gpu_util: float | None,
    baseline: Path | None,
    tolerance: float,
    repeat: int,
) -> GateOptions:
    """Check every option before the job starts: a typo must not cost a training run."""
    if fail_on not in ("error", "warning"):
        raise TrainprofError(f"--fail-on must be `error` or `warning`, not {fail_on!r}")
    from trainprof.analysis.rules import all_rules  # here: the other commands do not load it
    from trainprof.gate.gates import GateOptions, parse_size

    known = {r.id for r in all_rules()}
    unknown = [a for a in allow if a not in known]
    if unknown:
        raise TrainprofError(
            f"--allow {unknown[0]}: no finding has that id; `trainprof rules` lists them all"
        )
    rss = None
    if max_peak_rss is not None:
        rss = parse_size(max_peak_rss)
        if rss is None or rss <= 0:
            raise TrainprofError(
                f"--max-peak-rss {max_peak_rss!r} is not a size (8GB, 8GiB, 512M, 1.5G)"
            )
    from trainprof.compare.load import load_report

    base = load_report(baseline, "--baseline")[0] if baseline is not None else None
    return GateOptions(
        fail_on=fail_on,
        allow=tuple(allow),
        min_samples_per_s=min_samples_per_s,
        max_data_wait=max_data_wait,
        max_step_p95_s=max_step_p95,
        max_peak_rss=rss,
        min_gpu_util=min_gpu_util,
        baseline=base,
        baseline_name=str(baseline) if baseline is not None else None,
        tolerance=tolerance,
        repeat=repeat,
    )


def _write_outputs(
    verdict: Verdict, data: dict[str, Any], junit: Path | None, json_path: Path | None
) -> None:
    from trainprof.gate import github
    from trainprof.gate.junit import junit_xml

    run = data.get("run") or {}
    command = shell_join(str(a) for a in run.get("command") or [])
    if json_path is not None:
        _write(json_path, json.dumps(data, indent=1) + "\n", "--json")
    if junit is not None:
        _write(junit, junit_xml(verdict.gates, data, command, run.get("wall_s")), "--junit")
    if github.on_github():
        fail_on = data["ci"]["fail_on"]
        for line in github.annotation_lines(verdict, data, fail_on, os.getcwd()):
            print(line, flush=True)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        try:
            with open(summary, "a", encoding="utf-8") as f:
                f.write(github.step_summary(verdict, verdict.gates, data, command, os.getcwd()))
        except OSError as exc:
            print(f"trainprof: could not append to $GITHUB_STEP_SUMMARY: {exc}", file=sys.stderr)


def _write(path: Path, text: str, option: str) -> None:
    try:
        rundir.write_user_file(path, text)
    except OSError as exc:  # the run directory still holds report.json: nothing is lost
        print(f"trainprof: could not write {option} {path}: {exc.strerror}", file=sys.stderr)
