"""Overhead: the synthetic loop (``bench/loop.py``) run plain, under ``trainprof run`` with and
without its parts, and under py-spy, interleaved round by round; plus two in-process views of
the probe's own cost (hook by hook, and hooks switched off and on inside the loop).

Whole-process variants answer "how much slower is my job"; on a shared 2-core machine their
spread is several per cent, far more than the probe's microseconds. The in-process views
resolve those microseconds: ``micro`` times each hook's wrapper around a trivial callable
(best case, hot caches), ``toggle`` switches the installed hooks off and on between short
blocks of real steps (the loop's own caches, with an A/A block pair as its noise floor).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import stats

LOOP = Path(__file__).resolve().parent / "loop.py"
RUN_TIMEOUT_S = 180.0
DISABLE_ENV = "TRAINPROF_PROBE_DISABLE"  # trainprof.store.schema.ENV_DISABLE


@dataclass(frozen=True)
class Variant:
    key: str
    label: str
    meaning: str
    kind: str  # "plain" | "trainprof" | "pyspy"
    disable: str | None = None  # TRAINPROF_PROBE_DISABLE
    flags: tuple[str, ...] = ()  # extra `trainprof run` options
    pyspy: tuple[str, ...] = ()  # extra `py-spy record` options


VARIANTS: tuple[Variant, ...] = (
    Variant("plain", "plain", "python loop.py, nothing attached", "plain"),
    Variant(
        "trainprof",
        "trainprof (default)",
        "trainprof run --quiet: probe + psutil sampler + py-spy stacks (50 Hz, non-blocking)",
        "trainprof",
    ),
    Variant(
        "no-stacks",
        "trainprof --no-stacks",
        "probe + psutil sampler, no py-spy",
        "trainprof",
        flags=("--no-stacks",),
    ),
    Variant(
        "probe-off",
        "probe off",
        "TRAINPROF_PROBE_DISABLE=all: psutil sampler + py-spy stacks + runner only",
        "trainprof",
        disable="all",
    ),
    Variant(
        "outside-only",
        "probe off, --no-stacks",
        "TRAINPROF_PROBE_DISABLE=all --no-stacks: psutil sampler + runner only",
        "trainprof",
        disable="all",
        flags=("--no-stacks",),
    ),
    Variant(
        "steps-off",
        "probe: steps off",
        "default minus the optimizer-step hook",
        "trainprof",
        disable="steps",
    ),
    Variant(
        "loader-off",
        "probe: loader off",
        "default minus the DataLoader __next__/_next_index/__iter__ hooks",
        "trainprof",
        disable="loader",
    ),
    Variant(
        "fetch-off",
        "probe: fetch off",
        "default minus the dataset-fetch timer",
        "trainprof",
        disable="fetch",
    ),
    Variant(
        "pyspy",
        "py-spy 100 Hz nonblocking",
        "py-spy record --rate 100 --nonblocking -o /dev/null -- python loop.py",
        "pyspy",
        pyspy=("--nonblocking",),
    ),
    Variant(
        "pyspy-blocking",
        "py-spy 100 Hz blocking",
        "py-spy record --rate 100 -o /dev/null -- python loop.py (pauses the job per sample)",
        "pyspy",
    ),
)
QUICK_KEYS = ("plain", "trainprof", "pyspy")


@dataclass
class RunResult:
    variant: str
    round: int
    rates: list[float] | None
    wall_s: float
    error: str | None = None
    cpu_rates: list[float] | None = None
    detail: str | None = None  # the end of stderr of a failed run (kept in --json)


@dataclass
class OverheadResult:
    sizes: list[str]
    loop_args: list[str]
    variants: list[Variant]
    runs: list[RunResult] = field(default_factory=list)
    rounds: int = 0
    micro: dict[str, Any] | None = None
    toggle: dict[str, Any] | None = None
    calibration: dict[str, Any] | None = None
    seconds: float = 0.0


def py_spy() -> str | None:
    here = Path(sys.executable).parent / "py-spy"
    return str(here) if here.is_file() else shutil.which("py-spy")


def _clean_env() -> dict[str, str]:
    """The caller's environment without any trainprof variables (a bench run inside a
    ``trainprof run`` must not hand the outer run's directory to the variants)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("TRAINPROF_")}


def command(v: Variant, loop_args: list[str], run_dir: Path) -> list[str]:
    job = [sys.executable, str(LOOP), *loop_args]
    if v.kind == "plain":
        return job
    if v.kind == "trainprof":
        run = [sys.executable, "-m", "trainprof", "run", "--quiet", "--run-dir", str(run_dir)]
        return [*run, *v.flags, str(LOOP), *loop_args]
    spy = py_spy()
    if spy is None:
        raise RuntimeError("py-spy not found")
    return [spy, "record", "--rate", "100", *v.pyspy, "-o", os.devnull, "--", *job]


def last_json(text: str) -> dict[str, Any] | None:
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                return obj
    return None


def run_variant(v: Variant, loop_args: list[str], work: Path, rnd: int) -> RunResult:
    run_dir = work / f"{v.key}-{rnd}"
    env = _clean_env()
    if v.disable:
        env[DISABLE_ENV] = v.disable
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            command(v, loop_args, run_dir),
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            cwd=work,
        )
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
        return RunResult(v.key, rnd, None, time.monotonic() - t0, f"{type(exc).__name__}: {exc}")
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    wall = time.monotonic() - t0
    out = last_json(proc.stdout)
    if proc.returncode != 0 or out is None or "rates" not in out:
        text = (proc.stderr or proc.stdout).strip()
        tail = text.splitlines()[-1:] or ["no output"]
        return RunResult(
            v.key, rnd, None, wall, f"exit {proc.returncode}: {tail[0][:200]}", detail=text[-3000:]
        )
    rates = [float(r["steps_per_s"]) for r in out["rates"]]
    cpu = [float(r.get("cpu_steps_per_s") or 0.0) for r in out["rates"]]
    return RunResult(v.key, rnd, rates, wall, cpu_rates=cpu)


def calibrate(targets: list[float]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(LOOP), "--calibrate", ",".join(str(t) for t in targets)],
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    out = last_json(proc.stdout)
    if out is None:
        raise RuntimeError(f"calibration failed: {proc.stderr.strip()[-500:]}")
    return out


def run_rounds(
    variants: list[Variant],
    loop_args: list[str],
    sizes: list[str],
    min_rounds: int,
    max_rounds: int,
    budget_s: float,
    log: Any,
) -> OverheadResult:
    """Round after round, every variant once; odd rounds in reverse order (A B … B A), so a
    slow drift of the machine's load does not favour the variants that run first."""
    res = OverheadResult(sizes=sizes, loop_args=loop_args, variants=variants)
    t_start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="trainprof-bench-") as tmp:
        work = Path(tmp)
        for rnd in range(max_rounds):
            t_round = time.monotonic()
            order = variants if rnd % 2 == 0 else list(reversed(variants))
            for v in order:
                r = run_variant(v, loop_args, work, rnd)
                res.runs.append(r)
                shown = ", ".join(f"{x:.1f}" for x in r.rates) if r.rates else r.error
                log(f"  round {rnd + 1} {v.key:<15} {r.wall_s:5.1f} s  steps/s: {shown}")
            res.rounds = rnd + 1
            spent = time.monotonic() - t_start
            per_round = time.monotonic() - t_round
            if res.rounds >= min_rounds and spent + per_round > budget_s:
                break
    res.seconds = time.monotonic() - t_start
    return res


def summarize(res: OverheadResult, cpu: bool = False) -> list[dict[str, Any]]:
    """Per variant and size: median steps/s, and the ratio to plain of the same round
    (median, min, max over rounds). ``cpu``: steps per second of the loop thread's CPU time."""
    by: dict[tuple[str, int], list[float]] = {}
    for r in res.runs:
        rates = r.cpu_rates if cpu else r.rates
        if rates is not None and all(x > 0 for x in rates):
            by[(r.variant, r.round)] = rates
    rows = []
    for v in res.variants:
        cells = []
        for i, _h in enumerate(res.sizes):
            rates = [by[(v.key, k)][i] for k in range(res.rounds) if (v.key, k) in by]
            ratios = [
                by[(v.key, k)][i] / by[("plain", k)][i]
                for k in range(res.rounds)
                if (v.key, k) in by and ("plain", k) in by and by[("plain", k)][i] > 0
            ]
            cells.append(
                {
                    "steps_per_s": stats.median(rates) if rates else None,
                    "ratio": stats.median(ratios) if ratios else None,
                    "ratio_min": min(ratios) if ratios else None,
                    "ratio_max": max(ratios) if ratios else None,
                    "n": len(ratios),
                }
            )
        errors = [r.error for r in res.runs if r.variant == v.key and r.error]
        rows.append({"key": v.key, "label": v.label, "cells": cells, "errors": errors})
    return rows


def ratio_rows(rows: list[dict[str, Any]], sizes: list[str], plain_label: str) -> list[list[str]]:
    """The overhead table's cells (CPU and GPU benchmarks alike): a column per size, plain's
    median rate, then each variant's ratio to plain: median (min–max) [median loss]."""
    plain = next(r for r in rows if r["key"] == "plain")
    heads = [
        f"≈{_nominal(c['steps_per_s'])}/s ({h})" for c, h in zip(plain["cells"], sizes, strict=True)
    ]
    lines = [["variant", *heads]]
    lines.append(
        [plain_label]
        + [f"{c['steps_per_s']:.1f}" if c["steps_per_s"] else "n/a" for c in plain["cells"]]
    )
    for r in rows:
        if r["key"] == "plain":
            continue
        cells = []
        for c in r["cells"]:
            if c["ratio"] is None:
                cells.append("failed")
                continue
            cells.append(
                f"{c['ratio']:.3f} ({c['ratio_min']:.3f}–{c['ratio_max']:.3f}) {_loss(c['ratio'])}"
            )
        lines.append([r["label"], *cells])
    return lines


def table(res: OverheadResult, cpu: bool = False) -> str:
    rows = summarize(res, cpu)
    out = stats.format_table(ratio_rows(rows, res.sizes, "plain (median steps/s)"))
    notes = [f"  {r['key']}: {e}" for r in rows for e in r["errors"][:2]]
    what = "steps per CPU-second of the loop thread" if cpu else "wall-clock steps/s"
    footer = (
        f"{what}, ratio to plain in the same round: median (min–max) over {res.rounds} rounds, "
        "[median loss]; a ratio > 1 (faster than plain) is noise."
    )
    return "\n".join([out, footer, *notes])


def _nominal(rate: float | None) -> str:
    """The measured rate to two significant digits (a fixed "≈1000" label misnamed the H200
    machine's ≈540 steps/s)."""
    return f"{float(f'{rate:.2g}'):g}" if rate else "?"


def _loss(ratio: float) -> str:
    return f"[{(1 - ratio) * 100:+.1f} %]"


# ---------------------------------------------------------------- in-process views


def probe_env(run_dir: Path) -> dict[str, str]:
    """The environment `trainprof run` gives the job (probe in, no runner, no samplers)."""
    from trainprof.collect.launcher import probe_env as tp_probe_env

    return tp_probe_env(run_dir, None, base=_clean_env())


def run_in_probe(args: list[str], timeout: float = RUN_TIMEOUT_S) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="trainprof-bench-probe-") as tmp:
        proc = subprocess.run(
            args, env=probe_env(Path(tmp)), capture_output=True, text=True, timeout=timeout
        )
    out = last_json(proc.stdout)
    if proc.returncode != 0 or out is None:
        return {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]}
    return out


def micro() -> dict[str, Any]:
    return run_in_probe([sys.executable, "-m", "bench.micro"])


TOGGLE_RUNS = 3  # in-loop toggle runs (processes); each hook's cost is the median of the runs
# The toggle's loop: small and fast (≈ 4000 steps/s here), so that a step's noise, which grows
# with its length, lets a few µs be resolved (±3 µs A/A here, ±12 µs at the 1000 steps/s size)
TOGGLE_SIZE = "64x8"
# A block's median wall step (a preempted step does not count); the loop thread's CPU time a
# block ("cost_us_cpu", kept in the JSON) scattered as much with a load of 7 on these 2 cores
TOGGLE_KEY = "cost_us_paired"


def toggle(size: str, measure_s: float, runs: int = TOGGLE_RUNS) -> dict[str, Any]:
    """``runs`` toggle runs of ``measure_s`` with all hooks (on, A/A, all off), then ``runs``
    by part: every run's rows, and per hook the median of the runs' paired costs (``hooks``:
    name -> [median µs a step, median half-width]; "all" and "same" from the first runs)."""
    done: list[dict[str, Any]] = []
    for by_part in (False, True):
        for _ in range(runs):
            cmd = [sys.executable, str(LOOP), "--toggle", "--sizes", size]
            cmd += ["--measure-s", str(measure_s), *(["--by-part"] if by_part else [])]
            out = run_in_probe(cmd)
            if "error" in out:
                return out
            out["by_part"] = by_part
            done.append(out)
    totals = [r["toggle"][0] for r in done if not r["by_part"]]
    parts = [r["toggle"][0] for r in done if r["by_part"]]

    def med(rows: list[dict[str, Any]], name: str) -> list[float]:
        return [stats.median(r[TOGGLE_KEY][name][i] for r in rows) for i in (0, 1)]

    hooks = {name: med(totals, name) for name in ("same", "all")}
    hooks.update({n: med(parts, n) for n in parts[0][TOGGLE_KEY] if n not in hooks})
    return {
        "runs": done,
        "toggle": totals,
        "toggle_by_part": parts,
        "hooks": hooks,
        "parts_found": done[0]["parts_found"],
    }


def micro_table(m: dict[str, Any], rates: list[float]) -> str:
    if "error" in m:
        return f"micro: failed: {m['error']}"
    lines = [
        [
            "probe hook (per call)",
            "µs/call",
            "calls/step",
            "µs/step",
            *[f"at {r:.0f}/s" for r in rates],
        ]
    ]
    total = 0.0
    for row in m["hooks"]:
        per_step = row["us"] * row["per_step"]
        total += per_step
        pct = [f"{per_step * r / 1e4:.3f} %" for r in rates]
        lines.append(
            [row["name"], f"{row['us']:.2f}", f"{row['per_step']:g}", f"{per_step:.2f}", *pct]
        )
    lines.append(["total", "", "", f"{total:.2f}", *[f"{total * r / 1e4:.3f} %" for r in rates]])
    # a hook the benchmark could not call (the probe's internals moved) is said, not left out
    unmeasured = "".join(f"\nnot measured: {why}" for why in m.get("missing") or ())
    floors = [["what any hook pays (per call)", "µs/call"]]
    floors += [[f["name"], f"{f['us']:.3f}"] for f in m.get("floors") or ()]
    return (
        stats.format_table(lines)
        + (
            "\nbest case: each wrapper around a trivial callable, min of 7 timed repeats, hot caches."
        )
        + unmeasured
        + ("\n\n" + stats.format_table(floors) if len(floors) > 1 else "")
    )


TOGGLE_LABELS = {
    "same": "nothing switched (A/A noise floor)",
    "all": "all hot-path hooks",
    "steps": "  steps: optimizer post-hook",
    "loader": "  loader: __next__, _next_index, __iter__",
    "fetch": "  fetch: dataset fetch + collate timers",
    "backward": "  backward mark (CUDA timeline)",
    "zero_grad": "  zero_grad watch",
    "autocast": "  autocast watch",
    "pre_step": "  pre-step hook (CUDA timeline)",
    "steps empty": "  steps as an empty hook (its floor)",
    "loader empty": "  loader as empty wrappers (its floor)",
    "fetch empty": "  fetch as empty wrappers (its floor)",
}


def toggle_table(t: dict[str, Any]) -> str:
    """The hooks' in-loop cost: each run's paired median and the median of the runs."""
    if "error" in t:
        return f"toggle: failed: {t['error']}"
    totals, parts = t["toggle"], t["toggle_by_part"]
    period_us = 1e6 / stats.median(r["steps_per_s"] for r in totals)
    lines = [
        [
            "in-loop cost (µs a step)",
            *[f"run {i + 1}" for i in range(len(totals))],
            "median of runs",
            "share of a step",
        ]
    ]
    for name, (us, half) in t["hooks"].items():
        rows = totals if name in ("same", "all") else parts
        runs = [f"{r[TOGGLE_KEY][name][0]:+.1f}" for r in rows]
        label = TOGGLE_LABELS.get(name, name)
        lines.append([label, *runs, f"{us:+.1f} ± {half:.1f}", f"{us / period_us * 100:+.2f} %"])
    r0, p0 = totals[0], parts[0]
    head = (
        f"in-loop, {r0['size']} at {1e6 / period_us:.0f} steps/s: {len(totals)} runs of 3 modes "
        f"(on, on again, all off; {r0['cycles']} cycles a run), then {len(parts)} runs by part "
        f"({p0['cycles']} cycles a run); blocks of {r0['block_steps']} steps. A block's median "
        "step, paired with the reference's block of its cycle (all hooks: on − all off; A/A: "
        "on − on; a part: it alone − all off), median of the pairs ± its ~95 % half-width"
    )
    return head + "\n" + stats.format_table(lines)
