"""The console report (rich): what ran, the numbers, a step-time sparkline, then findings."""

from __future__ import annotations

import math
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from trainprof.analysis.findings import Verdict
from trainprof.analysis.ledger import DATA, DESCRIPTION, STALLS, STEP
from trainprof.analysis.metrics import Metrics

SPARK = "▁▂▃▄▅▆▇█"
STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def sparkline(values: tuple[float, ...] | list[float]) -> str:
    vals = [v for v in values if not math.isnan(v)]
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    if hi - lo <= 1e-12:
        return SPARK[0] * len(vals)
    return "".join(SPARK[min(7, int((v - lo) / (hi - lo) * 7.999))] for v in vals)


def _dur(seconds: float | None) -> str:
    if seconds is None or math.isnan(seconds):
        return "—"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    if seconds < 120:
        return f"{seconds:.2f} s"
    return f"{seconds / 60:.1f} min"


def _bytes(n: int | None) -> str:
    if n is None:
        return "—"
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n = n / 1024  # type: ignore[assignment]
    return f"{n} B"


def outcome(meta: dict[str, Any]) -> tuple[str, str]:
    code = meta.get("exit_code")
    stopped = meta.get("stopped_by")
    if stopped == "steps":
        return "stopped cleanly after --steps", "green"
    if stopped == "hang":
        return "stopped by trainprof: the job hung (--on-hang kill)", "red"
    if stopped == "timeout":
        return f"stopped by trainprof after --timeout {meta.get('timeout_s')} s", "red"
    if stopped == "interrupt":
        return (
            f"interrupted ({', '.join(meta.get('forwarded', [])) or 'signal'}) — partial report",
            "yellow",
        )
    if meta.get("signal"):
        return f"killed by {meta['signal']} (exit {code})", "red"
    if code == 0:
        return "exited 0", "green"
    if code is None:
        return "still running or unknown", "yellow"
    return f"exited {code}", "red"


def summary_table(meta: dict[str, Any], m: Metrics) -> Table:
    t = Table.grid(padding=(0, 2))
    t.add_column(style="dim", justify="right")
    t.add_column()
    what, style = outcome(meta)
    command = list(meta.get("command", []))
    if command:  # the interpreter's full path is noise: "python train.py" reads as typed
        command[0] = Path(command[0]).name
    t.add_row("command", shlex.join(command))
    t.add_row("outcome", Text(f"{what} in {_dur(meta.get('wall_s'))}", style=style))
    s = m.steady
    unit = "optimizer steps" if m.unit == "step" else "batches (no optimizer step seen)"
    t.add_row("steps", f"{m.total_steps} {unit}")
    if m.time_to_first_step_s is not None:
        compiled = m.activity.compile_s
        note = f" (torch.compile: {_dur(compiled)} of warm-up)" if compiled else ""
        t.add_row("start-up", f"{_dur(m.time_to_first_step_s)} to the first {m.unit}{note}")
    if s is None:
        t.add_row(
            "steady state",
            Text(f"not enough {m.unit}s to judge (need {m.warmup_steps + 5})", style="dim"),
        )
    else:
        t.add_row(
            "steady state",
            f"{s.count} {m.unit}s over {_dur(s.duration_s)} "
            f"(excluded warm-up: first {m.warmup_steps}, {_dur(m.warmup_s)} since launch)",
        )
        rate = f"{s.steps_per_s:.2f} it/s"
        rate += (
            f" · {s.samples_per_s:.1f} samples/s"
            if s.samples_per_s
            else " · samples/s unknown (no tensor batches)"
        )
        t.add_row("throughput", rate)
        t.add_row("step time", f"p50 {_dur(s.p50_s)} · p95 {_dur(s.p95_s)} · max {_dur(s.max_s)}")
        t.add_row(
            "data wait",
            Text("not measured: no torch DataLoader was iterated", style="dim")
            if s.data_wait_frac is None
            else f"{s.data_wait_frac:.0%} of step time ({_dur(s.wait_per_step_s)} per step)",
        )
        t.add_row("step times", Text(sparkline(m.sparkline), style="cyan"))
    t.add_row(
        "CPU",
        "—" if m.cpu_percent_mean is None else f"{m.cpu_percent_mean:.0f}% (job and workers, mean)",
    )
    t.add_row("peak memory", f"{_bytes(m.peak_rss_bytes)} RSS (job and workers)")
    gpu = (
        f"{m.gpu_util_mean:.0f}% mean"
        if m.gpu_util_mean is not None
        else f"not measured: {m.gpu_unavailable or 'no GPU samples'}"
    )
    t.add_row("GPU", gpu)
    if not m.torch_seen:
        t.add_row("", Text("torch was never imported: host metrics only", style="dim"))
    return t


LEDGER_GROUPS = (("data", DATA), ("stalls", STALLS), ("step", STEP), ("", ("unattributed",)))


def ledger_table(m: Metrics, verdict: Verdict) -> Table | None:
    """The time ledger: each bucket of the steady time (≥ 1 %), and the finding that claims it."""
    led = m.ledger
    if led is None:
        return None
    owner = {b: f.id for f in verdict.findings for b, _s in f.claimed}
    t = Table.grid(padding=(0, 2))
    t.add_column(style="dim", justify="right")
    t.add_column(justify="right")
    t.add_column()
    t.add_column(style="yellow")
    for group, buckets in LEDGER_GROUPS:
        first = True
        for b in buckets:
            share = led.share(b)
            if share < 0.01:
                continue
            t.add_row(group if first else "", f"{share:.0%}", DESCRIPTION[b], owner.get(b, ""))
            first = False
    split = (
        "the step split by stack samples"
        if led.step_split == "stack samples"
        else "the step not split (no stack samples)"
    )
    t.add_row("", "", Text(f"{_dur(led.window_s)} steady, host clock; {split}", style="dim"), "")
    return t


def relative_to(cwd: str | None) -> Callable[[str], str]:
    """Paths under the job's working directory read better relative (train.py:42)."""
    prefix = cwd.rstrip("/") + "/" if cwd else None
    return (lambda text: text.replace(prefix, "")) if prefix else (lambda text: text)


def findings_group(verdict: Verdict, verbose: bool = False, cwd: str | None = None) -> Table:
    """Each finding: a numbered headline, then evidence (•) and fixes (→) with hanging indents."""
    rel = relative_to(cwd)
    grid = Table.grid(padding=(0, 1))
    grid.add_column(justify="right", no_wrap=True)
    grid.add_column()
    shown = [f for f in verdict.findings if verbose or f.severity != "info"]
    if not shown:
        grid.add_row("", Text("No problems found. ✓", style="green"))
    for i, f in enumerate(shown, 1):
        head = Text()
        head.append(f"[{f.severity}] ", style=STYLE[f.severity])
        head.append(f.title, style="bold")
        impact = f", ~{f.impact:.0%} of time" if f.impact is not None else ""
        head.append(f"  ({f.id}{impact})", style="dim")
        grid.add_row(Text(f"{i}.", style="bold"), head)
        if f.where:
            grid.add_row("", Text(f"where: {rel(f.where)}", style="magenta"))
        if f.hotspot:
            grid.add_row("", Text(f"hot line: {rel(f.hotspot)}", style="magenta"))
        for e in f.evidence:
            grid.add_row("•", Text(rel(e)))
        for fx in f.fix:
            grid.add_row(Text("→", style="green"), Text(fx, style="green"))
    if verbose:
        for sk in verdict.skipped:
            grid.add_row("", Text(f"skipped {sk.id}: {sk.reason}", style="dim"))
    return grid


def render(
    console: Console, meta: dict[str, Any], m: Metrics, verdict: Verdict, verbose: bool = False
) -> None:
    console.print(
        Panel(summary_table(meta, m), title="trainprof report", title_align="left", expand=False)
    )
    ledger = ledger_table(m, verdict)
    if ledger is not None:
        console.print(Panel(ledger, title="where the time went", title_align="left", expand=False))
    console.print(
        Panel(
            findings_group(verdict, verbose, meta.get("cwd")),
            title="findings",
            title_align="left",
            expand=False,
        )
    )
    if meta.get("run_dir"):
        console.print(
            Text(f"run directory: {relative_to(meta.get('cwd'))(meta['run_dir'])}", style="dim")
        )
