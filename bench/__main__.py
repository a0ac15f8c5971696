"""``make bench`` = ``python -m bench``: overhead of trainprof (and py-spy) on a synthetic
training loop, what a day-long run costs the store, the analysis and the runner, what the
report of a many-rank multi-node job costs (``bench/ranks.py``), and what trainprof costs a
job whose 4 DataLoader workers keep every CPU busy (``bench/workers.py``).

Progress goes to stderr; the tables (and the targets, met or missed) to stdout at the end.
``--quick`` is a one-minute smoke version; ``--json PATH`` keeps every number.
No assertion is made on any timing: this is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import doc_tables, live, longrun, overhead, ranks, stats, workers
from bench.loop import DEFAULT_SIZES

MB = 2**20


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    ap.add_argument(
        "--quick", action="store_true", help="about a minute: fewer variants, shorter runs"
    )
    ap.add_argument("--sizes", default=DEFAULT_SIZES, help="HIDDENxBATCH of the loop's models")
    ap.add_argument(
        "--calibrate", action="store_true", help="pick the widths for ≈1000/100/10 steps/s first"
    )
    ap.add_argument("--variants", default="", help="comma list of variant keys (default: all)")
    ap.add_argument("--min-rounds", type=int, default=None)
    ap.add_argument("--max-rounds", type=int, default=None)
    ap.add_argument("--budget-s", type=float, default=None, help="time for the interleaved rounds")
    ap.add_argument("--measure-s", type=float, default=None, help="timed seconds per size and run")
    ap.add_argument("--steps", type=int, default=None, help="long run: optimizer steps")
    ap.add_argument("--hours", type=float, default=None, help="long run: hours of samples")
    ap.add_argument(
        "--rss-seconds", type=float, default=None, help="length of the real run for RSS"
    )
    ap.add_argument(
        "--ranks",
        default=None,
        help="many-rank job: NODESxRANKS_PER_NODE (default 4x64; --quick 4x16)",
    )
    ap.add_argument("--rank-steps", type=int, default=None, help="many-rank job: steps per rank")
    ap.add_argument("--skip-overhead", action="store_true")
    ap.add_argument("--skip-scale", action="store_true")
    ap.add_argument("--skip-ranks", action="store_true")
    ap.add_argument("--skip-workers", action="store_true")
    ap.add_argument("--skip-live", action="store_true")
    ap.add_argument(
        "--workers-rounds",
        type=int,
        default=None,
        help="workers job: rounds (default 6; --quick 2)",
    )
    ap.add_argument(
        "--workers-blocks",
        type=int,
        default=0,
        help="workers job: also switch trainprof's processes off and on in this many 2 s blocks",
    )
    ap.add_argument("--json", type=Path, default=None, help="write every number to this file")
    ap.add_argument("--markdown", type=Path, default=None, help="write the tables as Markdown")
    ap.add_argument(
        "--doc",
        type=Path,
        default=None,
        help="write the rows measured into this page's tables (docs/BENCHMARKS.md)",
    )
    ap.add_argument(
        "--machine", default=None, help="--doc: the machine column (default: CPUs, OS, load)"
    )
    a = ap.parse_args(argv)
    if a.doc is not None and a.quick:
        ap.error("--doc: a --quick run's numbers do not replace the page's")
    q = a.quick
    a.min_rounds = a.min_rounds or (2 if q else 3)
    a.max_rounds = a.max_rounds or (2 if q else 8)
    a.budget_s = a.budget_s or (30.0 if q else 400.0)
    a.measure_s = a.measure_s or (1.0 if q else 1.5)
    a.warmup_s = 0.3 if q else 0.5
    a.steps = a.steps or (100_000 if q else 1_000_000)
    a.hours = a.hours or (2.4 if q else 24.0)
    a.rss_seconds = a.rss_seconds or (8.0 if q else 30.0)
    a.toggle_s = 4.0 if q else 10.0
    a.ranks = a.ranks or ("4x16" if q else "4x64")
    a.rank_steps = a.rank_steps or (500 if q else 2000)
    a.workers_rounds = a.workers_rounds or (2 if q else 6)
    a.workers_measure_s = 4.0 if q else 12.0
    try:
        nodes, per_node = (int(x) for x in a.ranks.lower().split("x"))
    except ValueError:
        ap.error(f"--ranks {a.ranks}: expected NODESxRANKS_PER_NODE, like 8x128")
    if nodes < 2 or per_node < 1:
        ap.error("--ranks: at least 2 nodes (the report merges them) and 1 rank per node")
    a.rank_nodes, a.rank_per_node = nodes, per_node
    return a


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    a = _args(argv)
    started = time.monotonic()
    results: dict[str, Any] = {"argv": sys.argv[1:], "quick": a.quick}
    sections: list[tuple[str, str, list[list[str]] | None]] = []  # title, text, markdown rows

    sizes = a.sizes.split(",")
    if a.calibrate and not a.skip_overhead:
        log("calibrating model sizes for ≈1000, 100, 10 steps/s ...")
        cal = overhead.calibrate([1000, 100, 10])
        sizes = [str(x) for x in cal["sizes"]]
        results["calibration"] = cal
        log(f"  sizes {sizes}, measured {[round(x, 1) for x in cal['measured']]} steps/s")

    if not a.skip_overhead:
        log("probe hooks, per call (in-process) ...")
        micro = overhead.micro()
        log(
            f"toggling the probe's hooks inside the loop ({overhead.TOGGLE_SIZE}, "
            f"{overhead.TOGGLE_RUNS} runs of {a.toggle_s:.0f} s) ..."
        )
        tog = overhead.toggle(overhead.TOGGLE_SIZE, a.toggle_s)
        results["micro"], results["toggle"] = micro, tog

        keys = [k for k in a.variants.split(",") if k] or (
            list(overhead.QUICK_KEYS) if a.quick else [v.key for v in overhead.VARIANTS]
        )
        if "plain" not in keys:
            keys.insert(0, "plain")
        variants = [v for v in overhead.VARIANTS if v.key in keys]
        loop_args = [
            "--sizes", ",".join(map(str, sizes)),
            "--warmup-s", str(a.warmup_s),
            "--measure-s", str(a.measure_s),
        ]  # fmt: skip
        log(
            f"interleaved rounds: {len(variants)} variants, {a.min_rounds}-{a.max_rounds} rounds ..."
        )
        res = overhead.run_rounds(
            variants, loop_args, sizes, a.min_rounds, a.max_rounds, a.budget_s, log
        )
        rows = overhead.summarize(res)
        results["overhead"] = {
            "sizes": sizes,
            "loop_args": loop_args,
            "rounds": res.rounds,
            "seconds": res.seconds,
            "summary": rows,
            "runs": [r.__dict__ for r in res.runs],
        }
        plain_rates = [c["steps_per_s"] or 0.0 for c in rows[0]["cells"]]
        sections.append(("Whole-process overhead", overhead.table(res), _md_overhead(res, rows)))
        cpu_rows = overhead.summarize(res, cpu=True)
        results["overhead"]["summary_cpu"] = cpu_rows
        sections.append(
            (
                "Whole-process overhead, CPU time",
                overhead.table(res, cpu=True),
                _md_overhead(res, cpu_rows),
            )
        )
        sections.append(("Probe hooks, per call", overhead.micro_table(micro, plain_rates), None))
        if micro.get("distributed"):
            sections.append(
                ("torch.distributed wrappers, per call", _distributed_table(micro), None)
            )
        if micro.get("cuda_only"):
            sections.append(("CUDA jobs only, per step", _cuda_only_table(micro), None))
        sections.append(("Probe hooks in the loop, switched", overhead.toggle_table(tog), None))
        sections.append(("Variants", _variant_legend(variants), None))

    if not a.skip_scale:
        with tempfile.TemporaryDirectory(prefix="trainprof-bench-long-") as tmp:
            run_dir = Path(tmp) / "run"
            log(f"long run: generating {a.steps:,} steps and {a.hours:g} h of samples ...")
            gen = longrun.generate(run_dir, a.steps, a.hours)
            log(f"  {gen['total_bytes'] / MB:.1f} MB in {gen['generate_s']:.1f} s; analysing ...")
            ana = longrun.analyze_in_subprocess(run_dir)
        log(f"runner RSS during a real {a.rss_seconds:.0f} s run ...")
        rss = longrun.runner_rss(a.rss_seconds, sizes[0])
        results["scale"] = {"generate": gen, "analysis": ana, "runner": rss}
        sections.append(("Long run", _scale_table(gen, ana, rss), None))

    if not a.skip_live:
        log("a live judgement of the day, and the in-process probe against plain ...")
        with tempfile.TemporaryDirectory(prefix="trainprof-bench-live-") as tmp:
            judge = live.judge_cost(Path(tmp), a.steps)
            inproc = live.inprocess_cost(Path(tmp), 2 if a.quick else 5, 1000 if a.quick else 3000)
        results["live"] = {"judge": judge, "inprocess": inproc}
        sections.append(("Live judge and in-process probe", live.table(judge, inproc), None))

    if not a.skip_workers:
        log(
            f"a job of {workers.WORKERS} DataLoader workers, plain and under trainprof, "
            f"{a.workers_rounds} rounds ..."
        )
        wargs = workers.job_args(3.0, a.workers_measure_s)
        wres = workers.run_rounds(wargs, a.workers_rounds, a.workers_rounds, 1e9, log)
        wsum = workers.summarize(wres)
        text = workers.table(wsum, wres["rounds"])
        switched = None
        if a.workers_blocks:
            log(f"the same job, trainprof's processes switched in {a.workers_blocks} blocks ...")
            switched = workers.switched_summary(workers.switched(a.workers_blocks, log))
            text += "\n\n" + workers.switched_table(switched)
        results["workers"] = {**wres, "summary": wsum, "switched": switched}
        sections.append(
            (
                "A job that keeps the CPUs busy: 4 DataLoader workers, with and without trainprof",
                text,
                None,
            )
        )

    if not a.skip_ranks:
        log(
            f"many-rank job: {a.rank_nodes} nodes × {a.rank_per_node} ranks × "
            f"{a.rank_steps:,} steps, then its merged report ..."
        )
        many = ranks.run(a.rank_nodes, a.rank_per_node, a.rank_steps)
        results["ranks"] = many
        sections.append(("Many ranks: trainprof report NODE_DIR ...", ranks.table(many), None))

    results["targets"] = _targets(results)
    if results.get("workers"):
        w = results["workers"]
        results["targets"] += workers.targets(w["summary"], w["switched"])
    sections.append(("Targets", _targets_text(results["targets"]), None))
    results["bench_seconds"] = time.monotonic() - started
    results["complete"] = not (a.skip_overhead or a.skip_scale or a.skip_ranks or a.skip_workers)
    for title, text, _ in sections:
        print(f"\n== {title} ==\n{text}")
    print(f"\nbench took {results['bench_seconds']:.0f} s")
    if a.json:
        a.json.write_text(json.dumps(results, indent=1, default=str) + "\n")
    if a.markdown:
        parts = []
        for title, text, md in sections:
            body = stats.markdown_table(md) if md else f"```\n{text}\n```"
            parts.append(f"### {title}\n\n{body}\n")
        a.markdown.write_text("\n".join(parts))
    if a.doc:
        machine = a.machine or doc_tables.machine_label()
        text = doc_tables.update(
            a.doc.read_text(encoding="utf-8"), doc_tables.rows(results), machine
        )
        a.doc.write_text(text, encoding="utf-8")
        log(f"rows written into {a.doc}")
    return 0


def _variant_legend(variants: list[overhead.Variant]) -> str:
    return "\n".join(f"{v.label:<28} {v.meaning}" for v in variants)


def _md_overhead(res: overhead.OverheadResult, rows: list[dict[str, Any]]) -> list[list[str]]:
    return overhead.ratio_rows(rows, res.sizes, "plain (median steps/s)")


def _distributed_table(micro: dict[str, Any]) -> str:
    rows = [["wrapper (per call)", "µs/call", "calls"]]
    rows += [[d["name"], f"{d['us']:.2f}", d["calls"]] for d in micro["distributed"]]
    return stats.format_table(rows) + (
        f"\nfor scale: the real backward it wraps took {micro['backward_plain_us']:.1f} µs "
        "(a two-node graph on this CPU); best case, min of 7 timed repeats, hot caches."
    )


def _cuda_only_table(micro: dict[str, Any]) -> str:
    rows = [["probe work (per step)", "µs", "how often"]]
    rows += [[d["name"], f"{d['us']:.2f}", d["calls"]] for d in micro["cuda_only"]]
    return stats.format_table(rows) + (
        "\nthe timeline's own Python, with stand-in events that cost nothing (real CUDA event "
        "records, queries and the allocator read come on top); best case, min of 7 repeats."
    )


def _scale_table(gen: dict[str, Any], ana: dict[str, Any], rss: dict[str, Any]) -> str:
    steps = gen["steps"]
    rows = [
        ["measure", "value", "target"],
        ["synthetic run", f"{steps:,} steps, {gen['hours']:g} h of samples", ""],
        ["events, main process", f"{gen['events_bytes'] / steps:.1f} B/step", "≤ 64 B/step"],
        [
            "samples.jsonl",
            f"{gen['samples_bytes'] / MB:.1f} MB ({gen['samples_bytes'] / longrun.samples_ticks(gen['hours']):.0f} B/tick)",
            "",
        ],
        ["run directory, all files", f"{gen['total_bytes'] / steps:.1f} B/step", "≤ 64 B/step"],
    ]
    if "error" in ana:
        rows.append(["analysis", f"failed: {ana['error']}", ""])
    else:
        total = ana["load_s"] + ana["analyze_s"]
        rows += [
            ["Session.load", f"{ana['load_s']:.2f} s", ""],
            ["analyze()", f"{ana['analyze_s']:.2f} s", ""],
            ["load + analyze", f"{total:.2f} s", "≤ 10 s"],
            ["analysis peak RSS", f"{ana['peak_rss_bytes'] / MB:.0f} MB", ""],
        ]
    r = rss
    if r.get("runner_rss_live_max"):
        rows += [
            [
                f"runner RSS, real {r['seconds']:.0f} s run",
                f"{r['runner_rss_first'] / MB:.0f} → {r['runner_rss_last_live'] / MB:.0f} MB, "
                f"max {r['runner_rss_live_max'] / MB:.0f} MB, {_fmt(r['runner_rss_slope_mb_per_min'])} MB/min",
                "flat, ≤ 150 MB",
            ],
            ["runner RSS incl. its final report", f"{r['runner_rss_max'] / MB:.0f} MB", ""],
        ]
        if r.get("runner_cpu_pct") is not None:
            rows.append(
                [
                    "CPU outside the job, while it runs",
                    f"runner (psutil sampler, live tail) {r['runner_cpu_pct']:.1f} % of a core, "
                    f"py-spy {r['pyspy_cpu_pct'] or 0:.1f} %",
                    "",
                ]
            )
        if r.get("pyspy_rss_last"):
            rows.append(
                [
                    "py-spy (stacks) RSS",
                    f"{r['pyspy_rss_first'] / MB:.0f} → {r['pyspy_rss_last'] / MB:.0f} MB, "
                    f"{_fmt(r['pyspy_rss_slope_mb_per_min'])} MB/min",
                    "",
                ]
            )
        secs = max(r["wall_s"], 1e-9)
        files = ", ".join(
            f"{k} {v / 1024:.0f} KiB" for k, v in sorted(r["files"].items()) if v > 1024
        )
        rows.append(["real run, files", files, ""])
        if r.get("event_bytes_per_step"):
            rows.append(
                ["real run, events", f"{r['event_bytes_per_step']:.1f} B/step", "≤ 64 B/step"]
            )
        stacks = r.get("stacks_bytes")
        if stacks:
            rows.append(["real run, py-spy traces", f"{stacks / secs / 1024:.0f} KiB/s of run", ""])
        ra = r.get("analysis") or {}
        if "load_s" in ra:
            rows.append(
                [
                    "real run, load + analyze",
                    f"{ra['load_s'] + ra['analyze_s']:.2f} s, peak RSS {ra['peak_rss_bytes'] / MB:.0f} MB "
                    f"(for {secs:.0f} s of run, stacks included)",
                    "",
                ]
            )
        if ra.get("stacks_bytes"):
            rows.append(
                [
                    "real run, parsing the traces",
                    f"{ra['stacks_parse_s'] / (ra['stacks_bytes'] / MB):.3f} s/MB, "
                    f"{ra['stacks_spans']:,} spans",
                    "",
                ]
            )
        if r.get("stacks_recorder"):
            rows.append(["stack recorder settings", json.dumps(r["stacks_recorder"]), ""])
    elif r.get("error"):
        rows.append(["runner RSS", f"failed: {r['error']}", ""])
    return stats.format_table(rows)


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.2f}"


def _cell(results: dict[str, Any], key: str, i: int) -> dict[str, Any] | None:
    rows = (results.get("overhead") or {}).get("summary") or []
    for r in rows:
        if r["key"] == key:
            return r["cells"][i] if i < len(r["cells"]) else None
    return None


def _loss_status(cell: dict[str, Any], limit: float) -> str:
    """met / missed only when every round agrees; otherwise the noise decides nothing."""
    worst, best = (1 - cell["ratio_min"]) * 100, (1 - cell["ratio_max"]) * 100
    if worst <= limit:
        return "met"
    if best > limit:
        return "MISSED"
    return "unresolved"


def _targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    ov = results.get("overhead")
    if ov:
        for i, (nominal, limit) in enumerate(((1000, 3.0), (100, 1.0))):
            c, p = _cell(results, "trainprof", i), _cell(results, "plain", i)
            if c and p and c["ratio"] is not None:
                loss = (1 - c["ratio"]) * 100
                out.append(
                    {
                        "target": f"default: ≤ {limit:g} % fewer steps/s at ≈{nominal} "
                        f"(plain: {p['steps_per_s']:.0f})",
                        "value": f"median {loss:+.1f} %, rounds {(1 - c['ratio_max']) * 100:+.1f} "
                        f"… {(1 - c['ratio_min']) * 100:+.1f} %",
                        "status": _loss_status(c, limit),
                    }
                )
        tog = results.get("toggle") or {}
        if tog.get("hooks"):
            (cost, half), (same, same_half) = tog["hooks"]["all"], tog["hooks"]["same"]
            noise = max(half, abs(same) + same_half)
            out.append(
                {
                    "target": "probe's hooks in the loop: ≤ 10 µs a step (median of runs)",
                    "value": f"{cost:.1f} ± {half:.1f} µs/step, up to {cost + noise:.1f} "
                    f"(A/A {same:+.1f} ± {same_half:.1f})",
                    "status": "met" if cost <= 10 else "MISSED",
                }
            )
            for nominal, limit in ((1000, 3.0), (100, 1.0)):
                pct, hi = cost * nominal / 1e4, (cost + noise) * nominal / 1e4
                out.append(
                    {
                        "target": f"probe alone (in-loop on/off): ≤ {limit:g} % at {nominal} steps/s",
                        "value": f"{cost:.1f} ± {noise:.1f} µs/step → {pct:.2f} % (≤ {hi:.2f} %)",
                        "status": "met"
                        if hi <= limit
                        else ("MISSED" if pct > limit else "unresolved"),
                    }
                )
        for i in range(len(ov["sizes"])):
            c, s, p = (
                _cell(results, "trainprof", i),
                _cell(results, "pyspy", i),
                _cell(results, "plain", i),
            )
            if c and s and p and c["ratio"] is not None and s["ratio"] is not None:
                if c["ratio_min"] > s["ratio_max"]:
                    status = "met"
                elif c["ratio_max"] < s["ratio_min"]:
                    status = "MISSED"
                else:
                    status = "unresolved"
                out.append(
                    {
                        "target": "default costs less than py-spy 100 Hz "
                        f"(≈{overhead._nominal(p['steps_per_s'])} steps/s)",
                        "value": f"ratio {c['ratio']:.3f} vs {s['ratio']:.3f} (medians)",
                        "status": status,
                    }
                )
    sc = results.get("scale")
    if sc:
        gen, ana, rss = sc["generate"], sc["analysis"], sc["runner"]
        per_step = gen["events_bytes"] / gen["steps"]
        total = gen["total_bytes"] / gen["steps"]
        out.append(
            {
                "target": "≤ 64 B/step on disk: event file",
                "value": f"{per_step:.1f} B/step",
                "status": "met" if per_step <= 64 else "MISSED",
            }
        )
        out.append(
            {
                "target": f"≤ 64 B/step on disk: run dir (+ {gen['hours']:g} h of samples, no stacks)",
                "value": f"{total:.1f} B/step",
                "status": "met" if total <= 64 else "MISSED",
            }
        )
        stacks, day = rss.get("stacks_bytes"), None
        if stacks and rss.get("wall_s"):
            est = longrun.stacks_day_estimate(
                stacks / rss["wall_s"], gen["hours"] * 3600, rss.get("stacks_recorder") or {}
            )
            day = est["bytes"]
            per_step = (gen["total_bytes"] + day) / gen["steps"]
            out.append(
                {
                    "target": "≤ 64 B/step on disk: + py-spy traces (measured rate, recorder's chunks)",
                    "value": f"{per_step:.0f} B/step (traces ≈ {day / 2**30:.2f} GiB per {gen['hours']:g} h)",
                    "status": "met" if per_step <= 64 else "MISSED",
                }
            )
        if "error" not in ana:
            secs = ana["load_s"] + ana["analyze_s"]
            out.append(
                {
                    "target": "analysis ≤ 10 s (events + samples)",
                    "value": f"{secs:.2f} s (peak RSS {ana['peak_rss_bytes'] / MB:.0f} MB)",
                    "status": "met" if secs <= 10 else "MISSED",
                }
            )
            ra = rss.get("analysis") or {}
            if day is not None and ra.get("stacks_bytes"):
                parse = ra["stacks_parse_s"] / ra["stacks_bytes"] * day
                out.append(
                    {
                        "target": "analysis ≤ 10 s, with the day's py-spy traces",
                        "value": f"≈{secs + parse:.0f} s ({parse:.0f} s to parse {day / 2**20:.0f} MB of traces)",
                        "status": "met" if secs + parse <= 10 else "MISSED",
                    }
                )
        if rss.get("runner_rss_live_max"):
            slope = rss["runner_rss_slope_mb_per_min"] or 0.0
            mx = rss["runner_rss_live_max"] / MB
            out.append(
                {
                    "target": "runner RSS flat, ≤ 150 MB while the job runs",
                    "value": f"max {mx:.0f} MB, {slope:+.2f} MB/min",
                    "status": "met" if mx <= 150 and abs(slope) < 1.0 else "MISSED",
                }
            )
            if "error" not in ana:
                grow = (ana["peak_rss_bytes"] - ana["rss_after_imports_bytes"]) / MB
                end = rss["runner_rss_live_max"] / MB + grow
                out.append(
                    {
                        "target": "runner ≤ 150 MB at its end-of-run analysis of the long run",
                        "value": f"≈{end:.0f} MB (live {mx:.0f} + analysis {grow:.0f} MB)",
                        "status": "met" if end <= 150 else "MISSED",
                    }
                )
            spy = rss.get("pyspy_rss_slope_mb_per_min")
            if spy is not None and rss.get("pyspy_rss_first"):
                window = longrun.stacks_day_estimate(
                    1.0, gen["hours"] * 3600, rss.get("stacks_recorder") or {}
                )["pyspy_window_s"]
                peak = rss["pyspy_rss_first"] / MB + max(spy, 0.0) * window / 60
                out.append(
                    {
                        "target": "stack sampler (py-spy child) memory bounded (≤ 150 MB)",
                        "value": f"{spy:+.2f} MB/min while recording, restarted every "
                        f"{window:.0f} s → peak ≈{peak:.0f} MB",
                        "status": "met" if peak <= 150 else "MISSED",
                    }
                )
    return out


def _targets_text(targets: list[dict[str, Any]]) -> str:
    rows = [["target", "measured", ""]]
    rows += [[t["target"], t["value"], t["status"]] for t in targets]
    return stats.format_table(rows)


if __name__ == "__main__":
    sys.exit(main())
