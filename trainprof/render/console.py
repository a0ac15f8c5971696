"""The console report (rich): what ran, the numbers, a step-time sparkline, then findings."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from trainprof.analysis import ledger
from trainprof.analysis.findings import Verdict
from trainprof.analysis.ledger import CPU, DATA, STALLS, STEP
from trainprof.analysis.metrics import Metrics, batches_per_step
from trainprof.analysis.outcome import headline
from trainprof.analysis.stats import bins
from trainprof.render.host_rows import add_host_rows
from trainprof.render.outside import outside_summary
from trainprof.render.quiet_note import quiet_note, shut_down, steps_text
from trainprof.render.ranks import rank_table
from trainprof.render.text import ShellLine, clean, literal, shell_quote
from trainprof.units import fmt_duration, plural, plural_of

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


class SparkScale:
    """The sparkline between its scale: the lowest and the highest bar's value (a bar is the
    mean step time of its bin of steps, so a lone stall is diluted when bins hold several).
    On a narrow terminal the bars are re-binned until the line fits, never folded."""

    def __init__(self, values: tuple[float, ...] | list[float], steps: int) -> None:
        self.values = [v for v in values if not math.isnan(v)]
        self.steps = steps

    def _line(self, vals: list[float]) -> Text:
        if not vals:
            return Text("")
        out = Text(_dur(min(vals)) + " ", style="dim")
        out.append(sparkline(vals), style="cyan")
        out.append(" " + _dur(max(vals)), style="dim")
        return out

    def _note(self, bars: int) -> str:
        per = self.steps / bars if bars else 0
        return f"(a bar: the mean of ~{per:.0f} steps)" if per > 1.5 else ""

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        full = cell_len(self._line(self.values).plain)
        return Measurement(min(full, 24), full)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        vals = self.values
        over = cell_len(self._line(vals).plain) - options.max_width
        if over > 0 and len(vals) > 8:
            vals = bins(vals, max(8, len(vals) - over))  # fewer, wider bins: the line fits
        line = self._line(vals)
        line.overflow = "fold"
        note = self._note(len(vals))
        if note and cell_len(line.plain) + 2 + cell_len(note) <= options.max_width:
            line.append("  " + note, style="dim")
            note = ""
        yield line
        if note:
            yield Text(note, style="dim", overflow="fold")


def _dur(seconds: float | None) -> str:
    if seconds is None or math.isnan(seconds):
        return "—"
    return fmt_duration(seconds)


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
    if stopped == "runner-died":
        return (
            "trainprof was killed before the job ended (the job was stopped with it) — "
            "partial report",
            "red",
        )
    if meta.get("signal"):
        return f"killed by {meta['signal']} (exit {code})", "red"
    if code == 0:
        return "exited 0", "green"
    if meta.get("running"):
        return "still running: the report so far", "yellow"
    if code is None:
        return "still running or unknown", "yellow"
    return f"exited {code}", "red"


CHOOSE_PYTHON = "trainprof run -- /path/to/python train.py"  # how to run a script with another


def python_row(python: dict[str, Any]) -> str:
    """One line for the report's header: the interpreter, why it, and how to choose another."""
    path = str(python.get("path"))
    chosen = python.get("chosen")
    if chosen == "command":
        return path
    why = "the python on PATH" if chosen == "PATH" else "the Python trainprof runs on"
    return f"{path} ({why}; another: `{CHOOSE_PYTHON}`)"


def summary_table(meta: dict[str, Any], m: Metrics) -> Table:
    if m.outside is not None:  # `trainprof attach`: what was sampled, and the estimated rate
        return outside_summary(meta, m)
    t = Table.grid(padding=(0, 2))
    t.add_column(style="dim", justify="right", no_wrap=True)
    t.add_column(overflow="fold")
    what, style = outcome(meta)
    command = [str(a) for a in meta.get("command", [])]
    if command:  # the interpreter's full path is noise: "python train.py" reads as typed
        command[0] = Path(command[0]).name
    t.add_row("command", ShellLine(command))
    python = meta.get("python")
    if python:  # which interpreter ran the job, and how to choose another
        t.add_row("python", literal(python_row(python)))
    what += f" in {_dur(meta.get('wall_s'))}"
    if shut_down(meta):
        what += ", as Python shut down after the script ended"
    t.add_row("outcome", Text(what, style=style))
    rec = meta.get("recording")
    if rec:
        t.add_row(
            "recorded",
            Text(
                f"only the first {float(rec.get('stopped_at_s') or 0):.1f} s: "
                f"{clean(str(rec.get('reason')))} — partial report",
                style="yellow",
            ),
        )
    exc = meta.get("exception")
    if exc and m.total_steps == 0 and meta.get("exit_code") not in (0, None):
        first, after = headline(str(exc.get("message")))
        t.add_row(
            "failed",
            Text(
                f"before training: {clean(str(exc.get('type')))}: {clean(first)}"
                + (f" (and {plural(after, 'more line')} in the job's stderr)" if after else ""),
                style="red",
            ),
        )
    held = meta.get("suspended")
    if isinstance(held, dict) and isinstance(held.get("total_s"), (int, float)):
        times = len(held.get("spans") or [])
        t.add_row(
            "stopped",
            Text(
                f"the job was stopped by a signal for {held['total_s']:.1f} s"
                + (f" ({plural(times, 'time')})" if times > 1 else "")
                + ": not a hang, and not counted as a stall",
                style="yellow",
            ),
        )
    if meta.get("hint"):  # the job failed because of how it was started
        t.add_row("hint", Text(clean(str(meta["hint"])), style="yellow"))
    s = m.steady
    if m.probe_missing is not None:
        # Steps are the probe's to see: without it, none were seen, not "0 steps were made".
        reason = clean(m.probe_missing)
        t.add_row("steps", Text("not measured: the probe did not load in the job", style="yellow"))
        t.add_row("probe", Text(f"not loaded: {reason}: host metrics only", style="yellow"))
        add_host_rows(t, m, meta)
        return t
    t.add_row("steps", steps_text(m))
    opts = m.activity.optimizers
    if opts and len(opts.get("steps") or {}) > 1:
        t.add_row("", literal(_optimizers_note(opts)))
    if m.time_to_first_step_s is not None:
        compiled = m.activity.compile_s
        note = f" (torch.compile: {_dur(compiled)} of warm-up)" if compiled else ""
        t.add_row("start-up", f"{_dur(m.time_to_first_step_s)} to the first {m.unit}{note}")
    if s is None:
        t.add_row(
            "steady state",
            Text(
                f"not enough {plural_of(m.unit)} to judge (need {m.warmup_steps + 5})", style="dim"
            ),
        )
    else:
        t.add_row(
            "steady state",
            f"{plural(s.count, m.unit)} over {_dur(s.duration_s)} "
            f"(excluded warm-up: first {m.warmup_steps}, {_dur(m.warmup_s)} since launch)",
        )
        rate = f"{s.steps_per_s:.2f} it/s"
        per_step = batches_per_step(m)
        if per_step is not None and per_step > 1:
            # a progress bar over the DataLoader counts batches: say both, so they agree
            rate += (
                f" ({per_step} batches each: {s.steps_per_s * s.fetches_per_step:.1f} batches/s)"
            )
        rate += (
            f" · {s.samples_per_s:.1f} samples/s"
            if s.samples_per_s
            else " · samples/s unknown (no DataLoader: no batch size seen)"
            if m.unit == "backward pass"
            else " · samples/s unknown (no tensor batches)"
        )
        t.add_row("throughput", rate)
        t.add_row("step time", f"p50 {_dur(s.p50_s)} · p95 {_dur(s.p95_s)} · max {_dur(s.max_s)}")
        t.add_row(
            "data wait",
            Text("not measured: no torch DataLoader was iterated", style="dim")
            if s.data_wait_frac is None
            else _data_wait_text(m, s.data_wait_frac, s.wait_per_step_s),
        )
        t.add_row("step times", SparkScale(m.sparkline, len(m.durations_s)))
    add_host_rows(t, m, meta)
    if m.bottleneck is not None:
        t.add_row(
            "bottleneck", Text(f"{m.bottleneck.verdict}: {m.bottleneck.reason}", style="bold")
        )
    stopped = m.activity.timeline_error
    if m.device is not None:
        t.add_row("GPU step", _device_split(m))
    if stopped is not None:
        # The probe gave up its CUDA events (fail open); say so rather than show nothing.
        t.add_row("" if m.device else "GPU step", literal(f"device timeline stopped: {stopped}"))
    if m.mfu is not None or (m.on_cuda and m.activity.flops):
        t.add_row("GPU math", literal(_mfu_text(m)))
    errors = m.activity.probe_errors
    if errors:
        # The probe went past an error of its own (fail open): the job ran, some facts may not
        # have been recorded. Said, so a missing finding is not read as a clean bill.
        more = f" (+{len(errors) - 1} more in --json)" if len(errors) > 1 else ""
        t.add_row("", literal(f"probe error, facts may be missing: {errors[0]}{more}", "yellow"))
    if not m.torch_seen and not m.events_unread:
        t.add_row("", Text("torch was never imported: host metrics only", style="dim"))
    return t


LEDGER_GROUPS = (
    ("cpu", CPU),
    ("data", DATA),
    ("stalls", STALLS),
    ("step", STEP),
    ("", ("unattributed",)),
)


def ledger_table(m: Metrics, verdict: Verdict) -> Table | None:
    """The time ledger: each bucket of the steady time (≥ 1 %), and the finding that claims it."""
    led = m.ledger
    if led is None:
        return None
    owner = {b: f.id for f in verdict.findings for b, _s in f.claimed}
    t = Table.grid(padding=(0, 2))
    t.add_column(style="dim", justify="right", no_wrap=True)
    t.add_column(justify="right", no_wrap=True)
    t.add_column(overflow="fold")
    t.add_column(style="yellow", overflow="fold")
    for group, buckets in LEDGER_GROUPS:
        first = True
        for b in buckets:
            share = led.share(b)
            if share < 0.01:
                continue
            label = ledger.label(b, m.streams_data)
            t.add_row(group if first else "", f"{share:.0%}", label, owner.get(b, ""))
            first = False
    if led.step_split == "stack samples":
        split = "the step split by stack samples"
    elif m.activity.spans:
        split = "the step not split (too few stack samples outside stalls, saves and evaluations)"
    else:
        why = m.activity.stacks_error
        split = f"the step not split (no stack samples{': ' + clean(why) if why else ''})"
    t.add_row("", "", Text(f"{_dur(led.window_s)} steady, host clock; {split}", style="dim"), "")
    if m.bottleneck is not None and m.bottleneck.verdict == "gpu-bound":
        # A GPU engineer's first question on seeing "68% syncs" on a busy GPU.
        waits = " (its syncs wait for the GPU)" if led.share("sync") >= 0.01 else ""
        t.add_row(
            "",
            "",
            Text(f"gpu-bound: this host time overlaps the GPU's work{waits}", style="dim"),
            "",
        )
    return t


def _optimizers_note(opts: dict[str, Any]) -> str:
    """Which optimizer's steps are counted, and the others that stepped."""
    steps: dict[str, int] = opts.get("steps") or {}
    counted = opts.get("counted")
    others = [f"{label} {n}×" for label, n in steps.items() if label != counted]
    shown = ", ".join(others[:4]) + (f" and {len(others) - 4} more" if len(others) > 4 else "")
    return (
        f"counted: {counted} (the training optimizer; one that replaces it is followed); "
        f"{plural(len(steps) - 1, 'other optimizer')} stepped too: {shown}"
    )


def _device_split(m: Metrics) -> str:
    """A timed step on both clocks: forward, backward, optimizer, and between steps."""
    d = m.device
    assert d is not None
    parts = [
        ("forward", d.fwd_s, d.host_fwd_s),
        ("backward", d.bwd_s, d.host_bwd_s),
        ("optimizer", d.opt_s, d.host_opt_s),
        ("waiting for micro-batches", d.data_s, d.host_data_s),
        ("idle between steps", d.gap_s, d.host_gap_s),
    ]
    shown = " · ".join(
        f"{name} {_dur(dev)} (host {_dur(host)})" for name, dev, host in parts if dev is not None
    )
    return f"{shown} — device clock, {d.timed_steps} timed steps"


def _mfu_text(m: Metrics) -> str:
    """Achieved FLOP/s against the device's dense peak, or why there is no number."""
    u = m.mfu
    if u is None:
        why = (m.activity.flops or {}).get("skipped") or "no steady state to time it against"
        return f"MFU not measured: {why}"
    flops = f"{_sig(u.flops_per_step / 1e9)} GFLOP a step (step {u.counted_step}, counted)"
    if u.mfu is None:
        peak = f"no dense peak known for {u.gpu_name or 'this device'}: MFU not computed"
        return f"{_sig(u.achieved_tflops)} TFLOP/s achieved · {flops} · {peak}"
    return (
        f"MFU {_sig(u.mfu * 100)}%: {_sig(u.achieved_tflops)} of {u.peak_tflops:g} TFLOP/s "
        f"({u.precision} dense peak, {u.gpu_name}) · {flops}"
    )


def _sig(x: float) -> str:
    """One decimal, or two significant digits below 1 (a launch-bound job's 0.004 % MFU is a
    measurement, not 0.0)."""
    if x == 0 or abs(x) >= 1:
        return f"{x:,.1f}"
    return f"{x:.2g}"


def relative_to(cwd: str | None) -> Callable[[str], str]:
    """Paths under the job's working directory read better relative (train.py:42); a path that
    only holds the directory's path further in (/mnt/home/me/x.py for /home/me) is not under it."""
    prefix = cwd.rstrip("/") + "/" if cwd and cwd.rstrip("/") else None  # never "/" itself
    if prefix is None:
        return lambda text: text
    starts = re.compile(r"(?<![\w.~/-])" + re.escape(prefix))  # where a path starts
    return lambda text: starts.sub("", text)


_LOCATION = re.compile(r"^(?P<path>.+?):(?P<line>\d+)(?P<rest>\s.*)?$")


class Location:
    """``where: train.py:46 (main)``. The file:line is the point of a finding, so it is never
    cut: a path outside the job's directory drops leading directories (``…/examples/train.py:46``)
    until it fits the width, and what follows it wraps."""

    def __init__(self, label: str, where: str, cwd: str | None, style: str = "magenta") -> None:
        self.label, self.style = label, style
        text = relative_to(cwd)(clean(where))
        m = _LOCATION.match(text)
        if m is None:
            self.forms, self.rest = [text], ""
            return
        parts = m["path"].split("/")
        at = f":{m['line']}"
        self.forms = [m["path"] + at]
        self.forms += ["…/" + "/".join(parts[i:]) + at for i in range(1, len(parts)) if parts[i]]
        self.rest = m["rest"] or ""

    def text(self, form: str) -> Text:
        return Text(f"{self.label} {form}{self.rest}", style=self.style, overflow="fold")

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        full = Measurement.get(console, options, self.text(self.forms[0]))
        short = Measurement.get(console, options, self.text(self.forms[-1]))
        return Measurement(short.minimum, full.maximum)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        room = options.max_width - cell_len(self.label) - 1
        yield self.text(next((f for f in self.forms if cell_len(f) <= room), self.forms[-1]))


def _data_wait_text(m: Metrics, frac: float, per_step_s: float) -> str:
    """The steps' data wait; where evaluations ran between steps, the training steps' own
    (an evaluation's batches waited for inside a step are not the training loader's: a
    Lightning job read "89% of step time" beside a ledger whose data was 19%)."""
    train = m.activity.steps_wait_outside_evals
    if train is None:
        return f"{frac:.0%} of step time ({_dur(per_step_s)} per step)"
    return (
        f"{train:.0%} of step time in steps outside evaluations ({frac:.0%} counting the "
        "evaluations' batches)"
    )


def findings_group(
    verdict: Verdict,
    verbose: bool = False,
    cwd: str | None = None,
    meta: dict[str, Any] | None = None,
    m: Metrics | None = None,
) -> Table:
    """Each finding: a numbered headline, then evidence (•) and fixes (→) with hanging indents."""
    rel = relative_to(cwd)
    grid = Table.grid(padding=(0, 1))
    grid.add_column(justify="right", no_wrap=True)
    grid.add_column(overflow="fold")
    shown = [f for f in verdict.findings if verbose or f.severity != "info"]
    if not shown:
        text, ok = quiet_note(meta, m, verdict.findings)
        grid.add_row("", Text(text, style="green" if ok else "yellow"))
    for i, f in enumerate(shown, 1):
        head = Text(overflow="fold")
        head.append(f"[{f.severity}] ", style=STYLE[f.severity])
        head.append(clean(f.title), style="bold")
        impact = f", ~{f.impact:.0%} of time" if f.impact is not None else ""
        head.append(f"  ({clean(f.id)}{impact})", style="dim")
        grid.add_row(Text(f"{i}.", style="bold"), head)
        if f.where:
            grid.add_row("", Location("where:", f.where, cwd))
        if f.hotspot:
            grid.add_row("", Location("hot line:", f.hotspot, cwd))
        for e in f.evidence:
            grid.add_row("•", literal(rel(clean(e))))
        for fx in f.fix:
            grid.add_row(Text("→", style="green"), literal(rel(clean(fx)), style="green"))
    if verbose:
        for sk in verdict.skipped:
            grid.add_row("", literal(f"skipped {sk.id}: {sk.reason}", style="dim"))
    return grid


def rerender_hint(meta: dict[str, Any]) -> Text | None:
    """The command that prints this report again (``trainprof report <run dir>``)."""
    if not meta.get("run_dir"):
        return None
    run_dir = relative_to(meta.get("cwd"))(str(meta["run_dir"]))
    return literal(f"report again: trainprof report {shell_quote(run_dir)}", style="dim")


def render(
    console: Console, meta: dict[str, Any], m: Metrics, verdict: Verdict, verbose: bool = False
) -> None:
    """Three boxes of one width (the widest content's, at most the console's), then the run
    directory."""
    panels = [Panel(summary_table(meta, m), title="trainprof report", title_align="left")]
    ranks = rank_table(m.activity.ranks, meta.get("nodes"))  # torchrun: slowest, median, fastest
    if ranks is not None:
        panels.append(Panel(ranks, title="ranks", title_align="left"))
    time_box = ledger_table(m, verdict)
    if time_box is not None:
        panels.append(Panel(time_box, title="where the time went", title_align="left"))
    panels.append(
        Panel(
            findings_group(verdict, verbose, meta.get("cwd"), meta, m),
            title="findings",
            title_align="left",
        )
    )
    for p in panels:
        p.expand = False
    width = max(Measurement.get(console, console.options, p).maximum for p in panels)
    for p in panels:
        p.expand, p.width = True, min(width, console.width)
        console.print(p)
    if meta.get("run_dir"):
        run_dir = relative_to(meta.get("cwd"))(str(meta["run_dir"]))
        console.print(literal(f"run directory: {run_dir}", style="dim"))
