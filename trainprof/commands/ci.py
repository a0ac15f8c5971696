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

from trainprof.collect.runner import RunOptions
from trainprof.collect.runner import run as run_job
from trainprof.commands.options import (
    BASELINE,
    GATES,
    HANG_AFTER_HELP,
    JOB,
    OUTPUT,
    HtmlOut,
    JsonOut,
    NoColor,
    Quiet,
    RunDir,
    TraceOut,
    Verbose,
    option_names,
    refuse_stray_option,
)
from trainprof.commands.run import positive_seconds
from trainprof.errors import TrainprofError
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
            metavar="COMMAND...",
            help="train.py and its arguments, or -- and any command.",
            show_default=False,
        ),
    ],
    steps: Annotated[
        int,
        typer.Option(
            min=1,
            metavar="N",
            help="Steps to run, per window (default 50).",
            rich_help_panel=JOB,
        ),
    ] = 50,
    timeout: Annotated[
        float,
        typer.Option(
            callback=positive_seconds,
            metavar="SECONDS",
            help="Stop the job after this long (default 600).",
            rich_help_panel=JOB,
        ),
    ] = 600.0,
    hang_after: Annotated[
        float | None,
        typer.Option(
            callback=positive_seconds, metavar="SECONDS", help=HANG_AFTER_HELP, rich_help_panel=JOB
        ),
    ] = None,
    fail_on: Annotated[
        str,
        typer.Option(
            metavar="error|warning",
            help="Lowest failing severity (error).",
            rich_help_panel=GATES,
        ),
    ] = "error",
    allow: Annotated[
        list[str] | None,
        typer.Option(
            metavar="ID",
            help="Findings that never fail (repeat).",
            rich_help_panel=GATES,
        ),
    ] = None,
    min_samples_per_s: Annotated[
        float | None,
        typer.Option(
            callback=_check_positive,
            metavar="N",
            help="Fail below this steady samples/s.",
            rich_help_panel=GATES,
        ),
    ] = None,
    max_data_wait: Annotated[
        float | None,
        typer.Option(
            callback=_check_share,
            metavar="SHARE",
            help="Fail above this data-wait share.",
            rich_help_panel=GATES,
        ),
    ] = None,
    max_step_p95: Annotated[
        float | None,
        typer.Option(
            callback=_check_positive,
            metavar="SECONDS",
            help="Fail above this p95 step time.",
            rich_help_panel=GATES,
        ),
    ] = None,
    max_peak_rss: Annotated[
        str | None,
        typer.Option(
            metavar="SIZE",
            help="Fail above this peak memory (PSS of the job and its workers), e.g. 8GiB.",
            rich_help_panel=GATES,
        ),
    ] = None,
    min_gpu_util: Annotated[
        float | None,
        typer.Option(
            callback=_check_percent,
            metavar="PERCENT",
            help="Fail below this mean GPU util %.",
            rich_help_panel=GATES,
        ),
    ] = None,
    baseline: Annotated[
        Path | None,
        typer.Option(
            metavar="PATH",
            help="Fail when samples/s drops below this report's.",
            rich_help_panel=BASELINE,
        ),
    ] = None,
    tolerance: Annotated[
        float,
        typer.Option(
            callback=_check_tolerance,
            metavar="SHARE",
            help="The drop --baseline accepts (default 0.10).",
            rich_help_panel=BASELINE,
        ),
    ] = 0.10,
    repeat: Annotated[
        int,
        typer.Option(
            min=1,
            max=MAX_REPEAT,
            metavar="K",
            help=f"Gate on the median of K windows (1 to {MAX_REPEAT}).",
            rich_help_panel=BASELINE,
        ),
    ] = 1,
    json_path: JsonOut = None,
    junit: Annotated[
        Path | None,
        typer.Option(
            metavar="PATH",
            help="Also write JUnit XML: a testcase per gate.",
            rich_help_panel=OUTPUT,
        ),
    ] = None,
    html_path: HtmlOut = None,
    trace_path: TraceOut = None,
    run_dir: RunDir = None,
    quiet: Quiet = False,
    verbose: Verbose = False,
    no_color: NoColor = False,
) -> None:
    """Run a training job for a few steps as a CI check: fail on a crash, a hang, a finding,
    a threshold or a throughput regression.

    Exit codes: 0 every gate passed · 1 a gate failed or could not judge · 2 usage error ·
    3 the job crashed or hung.

    Example:

      trainprof ci --max-data-wait 0.2 --junit ci.xml train.py
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
    for option, path in (("--trace", trace_path), ("--html", html_path)):
        if path is not None:
            from trainprof.render.html import check_view_path

            check_view_path(path, option)
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
            trace_path=trace_path,
            html_path=html_path,
            option_names=option_names(ctx),
        )
    )
    if "data" not in captured:  # run() always reports; this guards the contract
        raise TrainprofError("the run ended without a report; nothing to judge", exit_code=3)
    from trainprof.compare.windows import step_windows
    from trainprof.gate.gates import evaluate
    from trainprof.gate.render import render_gates
    from trainprof.render.text import make_console

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

    if baseline is not None:
        rundir.check_readable(baseline, "--baseline")
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
    from trainprof.render.text import shell_join

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
