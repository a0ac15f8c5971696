"""A many-rank, multi-node torchrun job on disk, then what ``trainprof report A B C D`` does with it.

``generate`` writes one run directory per node, by hand, in the formats ``trainprof run`` writes
(``trainprof.store.schema``): per rank an event file (header with rank, local rank and world
size; ``T``; one ``S`` per optimizer step; the collective counters as an ``X`` record every
0.25 s, as ``trainprof.probe.collectives.emit`` writes them); the torchrun launcher's event
file; ``samples.jsonl`` with every rank's process at each 0.5 s tick, compacted as the sampler
writes it; ``run.json`` and the empty logs. Steps take 50 ms and end together on every rank
(synchronous data parallelism); each rank waits 20 ms of a step in DDP's all-reduce except one
straggler, which waits 1 ms (the others wait for it). Each node has its own monotonic clock and
a wall clock a millisecond off, so the merge has to align them.

``measure_in_subprocess`` then, in a fresh interpreter (so its peak RSS is the report's own,
``VmHWM``): loads the node directories (``Session.load``), merges them
(``trainprof.store.merge.merge``) and runs ``trainprof.report.report`` — the analysis,
every rule on every rank, the JSON report and the console report, rendered to a null console.

``python -m bench.ranks`` (4 nodes × 64 ranks × 2,000 steps, ≈ 3 s on 2 cores);
``--nodes 8 --per-node 128`` for 1,024 ranks. No timing is asserted: this is a measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import stats
from bench.longrun import LOADER_CONFIG as DAY_LOADER_CONFIG
from bench.longrun import _maxrss, _proc_row, _rss_now, dir_bytes
from trainprof.collect.samplers.loop import RowCompactor
from trainprof.store.schema import (
    EPOCH,
    INFO,
    LOADER,
    MAGIC,
    PROBE_LOADED,
    SCHEMA_VERSION,
    STEP,
    TORCH,
    event_file_name,
)

MB = 2**20
STEP_US = 50_000  # every rank's optimizer step
DDP_WAIT_S = 0.020  # each rank waits this long in DDP's all-reduce per step, for the straggler
STRAGGLER_WAIT_S = 0.001  # which waits only for the transfer itself
EMIT_EVERY_STEPS = 5  # the probe writes its collective counters at most every 0.25 s
TICK_S = 0.5  # the sampler's default interval (a run this short never widens it)
BATCH_SIZE = 32
FIRST_STEP_US = 3_000_000  # torch import, model and DDP construction before the first step
LAUNCHER_PID = 9999
FIRST_RANK_PID = 10_000  # pids repeat on every node, as they do on separate hosts
WALL0 = 1.7e9
# each rank's DataLoader, as the probe records its config: loading in the rank's own process
LOADER_CONFIG = {
    **DAY_LOADER_CONFIG,
    "num_workers": 0,
    "persistent_workers": False,
    "prefetch_factor": None,
    "sampler": "torch.utils.data.distributed.DistributedSampler",
}


def _header(pid: int, role: str, t0: float, wall0: float, **ranks: int | None) -> str:
    """The first line of an event file, key for key as ``EventWriter._open`` writes it."""
    header = {
        "magic": "trainprof-events",
        "version": SCHEMA_VERSION,
        "pid": pid,
        "ppid": LAUNCHER_PID if role == "rank" else LAUNCHER_PID - 1,
        "role": role,
        "argv": ["train.py"] if role == "rank" else ["torchrun", "train.py"],
        "executable": "python3",
        "t0": t0,
        "wall0": wall0,
        "rank": ranks.get("rank"),
        "local_rank": ranks.get("local_rank"),
        "world_size": ranks.get("world_size"),
    }
    return MAGIC + json.dumps(header) + "\n"


def _rank_body(steps: int, data_wait_us: int, ddp_wait_s: float) -> str:
    """Everything after the header: the same for every rank with the same waits."""
    lines = [
        f"{TORCH} 1500000\n",
        f"{LOADER} 0 {json.dumps(LOADER_CONFIG)}\n",
        f"{EPOCH} 0 {FIRST_STEP_US - 20_000} 20000\n",  # one epoch; its first batch
    ]
    t, ddp_s = FIRST_STEP_US, 0.0
    for i in range(steps):
        t += STEP_US
        ddp_s += ddp_wait_s
        lines.append(f"{STEP} {t} {STEP_US} {data_wait_us} 0 {BATCH_SIZE} 1 {BATCH_SIZE}\n")
        if i % EMIT_EVERY_STEPS == EMIT_EVERY_STEPS - 1 or i == steps - 1:
            counters = {"s": 0.0, "n": 0, "ddp_s": round(ddp_s, 6), "ddp_n": i + 1}
            info = {"t": t, "collectives": {**counters, "backend": "gloo"}}
            lines.append(f"{INFO} {json.dumps(info)}\n")
    return "".join(lines)


def _samples(path: Path, per_node: int, ticks: int, t_start: float) -> None:
    """The launcher and every rank process of the node at each tick, compacted as
    ``SamplerLoop`` writes them."""
    compactor = RowCompactor()
    gib = 1 << 30
    with open(path, "w") as f:
        for k in range(ticks):
            cpu = None if k == 0 else 98.0
            procs = [_proc_row(LAUNCHER_PID, LAUNCHER_PID - 1, "torchrun", 0.5, 80 << 20, 12)]
            procs += [
                _proc_row(FIRST_RANK_PID + lr, LAUNCHER_PID, "python", cpu, 3 * gib, 40)
                for lr in range(per_node)
            ]
            row = {
                "t": round(t_start + k * TICK_S, 3),
                "procs": procs,
                "cpu": 95.0,
                "mem": {"total": 1 << 40, "available": 1 << 39, "used": 1 << 39},
                "gpu": {"unavailable": "no NVIDIA driver (NVML not found)"},
            }
            f.write(json.dumps(compactor.compact(row), separators=(",", ":")) + "\n")


def generate(root: Path, nodes: int, per_node: int, steps: int, straggler: int) -> dict[str, Any]:
    """Write ``nodes`` run directories under ``root``; what was written and how fast."""
    started = time.monotonic()
    world = nodes * per_node
    bodies: dict[tuple[int, float], str] = {}  # ranks with the same waits share their lines
    dirs = []
    for n in range(nodes):
        run_dir = root / f"node-{n}"
        run_dir.mkdir(parents=True)
        dirs.append(run_dir)
        mono0 = 1000.0 + 37.0 * n  # each host's own monotonic clock
        wall0 = WALL0 + 0.001 * n  # and wall clocks that agree to a millisecond (NTP)
        for lr in range(per_node):
            rank = n * per_node + lr
            wait_us = 800 + 100 * (rank % 7)  # ranks differ a little in their data wait
            ddp = STRAGGLER_WAIT_S if rank == straggler else DDP_WAIT_S
            body = bodies.get((wait_us, ddp))
            if body is None:
                body = bodies[(wait_us, ddp)] = _rank_body(steps, wait_us, ddp)
            head = _header(
                FIRST_RANK_PID + lr, "rank", mono0, wall0,
                rank=rank, local_rank=lr, world_size=world,
            )  # fmt: skip
            (run_dir / event_file_name(FIRST_RANK_PID + lr)).write_text(head + body)
        launcher = _header(LAUNCHER_PID, "main", mono0 - 0.5, wall0 - 0.5) + f"{TORCH} 900000\n"
        (run_dir / event_file_name(LAUNCHER_PID)).write_text(launcher)
        run_s = (FIRST_STEP_US + steps * STEP_US) / 1e6 + 2.0
        t_launch = mono0 - 1.0
        _samples(run_dir / "samples.jsonl", per_node, int(run_s / TICK_S), t_launch + 0.03)
        meta = {
            "command": ["torchrun", "--nnodes", str(nodes), "--nproc-per-node", str(per_node),
                        "train.py"],
            "cwd": ".",
            "run_dir": str(run_dir),
            "usable_cpus": per_node,
            "t_launch": t_launch,
            "wall_start": wall0 - 1.0,
            "pid": LAUNCHER_PID,
            "stacks": {"chunks": [], "pid": None, "error": "synthetic run: no stack samples"},
            "exit_code": 0,
            "signal": None,
            "wall_s": run_s,
            "stopped_by": None,
        }  # fmt: skip
        (run_dir / "run.json").write_text(json.dumps(meta, indent=1) + "\n")
        for name in ("stdout.log", "stderr.log", PROBE_LOADED):
            (run_dir / name).write_bytes(b"")
    return {
        "nodes": nodes,
        "per_node": per_node,
        "ranks": world,
        "steps_per_rank": steps,
        "straggler": straggler,
        "dirs": [str(d) for d in dirs],
        "files": sum(len(list(d.iterdir())) for d in dirs),
        "bytes": sum(dir_bytes(d) for d in dirs),
        "generate_s": time.monotonic() - started,
    }


# ---------------------------------------------------------------- the report, in a fresh process


def _measure_here(dirs: list[str]) -> dict[str, Any]:
    """``trainprof report DIR1 DIR2 ...``'s work (``commands/report.py``), phase by phase."""
    from rich.console import Console

    from trainprof.report import report
    from trainprof.store.merge import merge
    from trainprof.store.session import Session

    rss_imports = _rss_now()
    t0 = time.perf_counter()
    sessions = [Session.load(d) for d in dirs]  # merge_nodes, in its two steps
    for d, s in zip(dirs, sessions, strict=True):
        s.meta.setdefault("run_dir", d)
    t1 = time.perf_counter()
    session = merge(sessions)
    t2 = time.perf_counter()
    with open(os.devnull, "w") as null:
        console = Console(file=null, width=100, highlight=False, markup=False, emoji=False)
        data = report(session, None, console=console)  # analysis, rules per rank, JSON, console
    t3 = time.perf_counter()
    findings = data.get("findings") or []
    return {
        "load_s": t1 - t0,
        "merge_s": t2 - t1,
        "report_s": t3 - t2,
        "peak_rss_bytes": _maxrss(),
        "rss_after_imports_bytes": rss_imports,
        "aligned_by": sorted(
            {n["aligned_by"] for n in session.meta.get("nodes") or [] if n["aligned_by"] != "base"}
        ),
        "ranks_seen": (data.get("ranks") or {}).get("count"),
        "slowest": (data.get("ranks") or {}).get("slowest"),
        "first_finding": findings[0]["title"] if findings else None,
    }


def measure_in_subprocess(dirs: list[str]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.ranks", "measure", *dirs],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=Path(__file__).resolve().parent.parent,
    )
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def run(
    nodes: int, per_node: int, steps: int, straggler: int | None = None, keep: Path | None = None
) -> dict[str, Any]:
    """Generate the job (in a temporary directory, or in ``keep``, left there), measure its
    report."""
    world = nodes * per_node
    if straggler is None:
        straggler = 77 if world > 77 else world - 1  # not rank 0, on no node's first rank
    if keep is not None:
        gen = generate(keep, nodes, per_node, steps, straggler)
        return {"generate": gen, "report": measure_in_subprocess(gen["dirs"])}
    with tempfile.TemporaryDirectory(prefix="trainprof-bench-ranks-") as tmp:
        gen = generate(Path(tmp), nodes, per_node, steps, straggler)
        report = measure_in_subprocess(gen.pop("dirs"))
    return {"generate": gen, "report": report}


def table(result: dict[str, Any]) -> str:
    gen, rep = result["generate"], result["report"]
    rows = [
        ["measure", "value"],
        [
            "synthetic job",
            f"{gen['ranks']:,} ranks ({gen['nodes']} nodes × {gen['per_node']}), "
            f"{gen['steps_per_rank']:,} steps each",
        ],
        ["on disk", f"{gen['files']:,} files, {gen['bytes'] / MB:.1f} MB"],
    ]
    if "error" in rep:
        return stats.format_table(rows + [["report", f"failed: {rep['error']}"]])
    total = rep["load_s"] + rep["merge_s"] + rep["report_s"]
    slowest = rep.get("slowest") or {}
    rows += [
        ["load (Session.load per node)", f"{rep['load_s']:.2f} s"],
        [f"merge (clocks aligned by {', '.join(rep['aligned_by'])})", f"{rep['merge_s']:.2f} s"],
        ["analyse + rules per rank + render", f"{rep['report_s']:.2f} s"],
        ["total", f"{total:.2f} s"],
        [
            "peak RSS (VmHWM)",
            f"{rep['peak_rss_bytes'] / MB:.0f} MB "
            f"({rep['rss_after_imports_bytes'] / MB:.0f} MB after imports)",
        ],
        ["ranks in the report", f"{rep['ranks_seen']}"],
        [
            "slowest rank found",
            f"{slowest.get('rank')} (straggler written: {gen['straggler']})",
        ],
    ]
    return stats.format_table(rows) + f"\nfirst finding: {rep.get('first_finding')}"


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.ranks", description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=4, help="run directories (default 4)")
    ap.add_argument("--per-node", type=int, default=64, help="ranks per node (default 64)")
    ap.add_argument("--steps", type=int, default=2000, help="optimizer steps per rank")
    ap.add_argument(
        "--straggler",
        type=int,
        default=None,
        help="the slow rank (default 77, or the last rank of a smaller job)",
    )
    ap.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="write the node directories here (new or empty) and leave them, for "
        "`trainprof report DIR/node-*` by hand",
    )
    ap.add_argument("--json", type=Path, default=None, help="write every number to this file")
    a = ap.parse_args(argv)
    if a.keep is not None and a.keep.exists() and (not a.keep.is_dir() or any(a.keep.iterdir())):
        ap.error(f"--keep {a.keep}: not an empty directory")
    if a.nodes < 2 or a.per_node < 1 or a.steps < 10:
        ap.error("needs --nodes ≥ 2 (a merge), --per-node ≥ 1, --steps ≥ 10")
    if a.straggler is not None and not 0 <= a.straggler < a.nodes * a.per_node:
        ap.error("--straggler must be one of the ranks")
    return a


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["measure"]:  # the child of measure_in_subprocess
        print(json.dumps(_measure_here(argv[1:])))
        return 0
    a = _args(argv)
    print(
        f"writing {a.nodes} nodes × {a.per_node} ranks × {a.steps:,} steps; measuring the report ...",
        file=sys.stderr,
    )
    result = run(a.nodes, a.per_node, a.steps, a.straggler, a.keep)
    print(table(result))
    if a.json:
        a.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0 if "error" not in result["report"] else 1


if __name__ == "__main__":
    sys.exit(main())
