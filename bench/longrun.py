"""Long runs: a day of training, written as trainprof would have written it, then read back.

``generate`` writes a run directory by hand, in the real formats: the main process's event
file with 1,000,000 optimizer steps exactly as the probe's hooks (``trainprof.probe``) and
``trainprof.probe.writer`` write them (header, ``T``, ``L``, ``B``, ``E`` per epoch, ``M`` around
evals, ``C`` per checkpoint, one ``S`` per step), two DataLoader workers' event files, and
``samples.jsonl`` for 24 h at the runner's default schedule (0.5 s, then 2 s after ten minutes:
about 44,000 rows shaped like ``trainprof.collect.samplers.host`` rows compacted as
``trainprof.collect.samplers.loop`` writes them, for the main process and its two workers, no GPU). ``analyze_in_subprocess`` then times ``Session.load`` and
``trainprof.analysis.pipeline.analyze`` in a fresh interpreter and reads its peak RSS
(``VmHWM``; ``ru_maxrss`` too, which on Linux carries the parent's peak across ``exec``).

``runner_rss`` runs a real ``trainprof run`` of the benchmark loop (~1000 steps/s) and samples
the runner's RSS (and its py-spy child's) with psutil every 0.5 s while the job runs.
"""

from __future__ import annotations

import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from trainprof.collect.samplers.loop import DEFAULT_INTERVAL_S, RowCompactor, sample_interval
from trainprof.store.schema import (
    BATCH,
    EPOCH,
    FETCH,
    LOADER,
    MAGIC,
    MODE,
    SAVE,
    SCHEMA_VERSION,
    STEP,
    TORCH,
    event_file_name,
)

BATCH_SIZE = 32
EPOCH_STEPS = 5000
EVAL_EVERY = 10000
SAVE_EVERY = 20000
WORKERS = 2
MAIN_PID = 4242
LOADER_CONFIG = {
    "batch_size": BATCH_SIZE,
    "num_workers": WORKERS,
    "pin_memory": False,
    "persistent_workers": True,
    "prefetch_factor": 2,
    "drop_last": False,
    "sampler": "torch.utils.data.sampler.RandomSampler",
    "batch_sampler": "torch.utils.data.sampler.BatchSampler",
    "collate_fn": "torch.utils.data._utils.collate.default_collate",
    "dataset": "train.ImageFolderLike",
    "len": EPOCH_STEPS,
    "sharing_strategy": "file_descriptor",
    "start_method": None,
}


def _header(pid: int, ppid: int, role: str, t0: float, wall0: float, **info: Any) -> str:
    """The first line of an event file, key for key as ``EventWriter._open`` writes it."""
    header = {
        "magic": "trainprof-events",
        "version": SCHEMA_VERSION,
        "pid": pid,
        "ppid": ppid,
        "role": role,
        **info,
        "argv": ["train.py", "--epochs", "200"],
        "executable": "python3",
        "t0": t0,
        "wall0": wall0,
        "rank": None,
        "local_rank": None,
        "world_size": None,
    }
    return MAGIC + json.dumps(header) + "\n"


def _write_lines(path: Path, lines: list[str]) -> int:
    data = "".join(lines).encode()
    with open(path, "ab") as f:
        f.write(data)
    return len(data)


def write_events(
    run_dir: Path, steps: int, seconds: float, t0: float, wall0: float, seed: int
) -> int:
    """The main process's event file: ``steps`` steps spread over ``seconds``."""
    rng = random.Random(seed)
    period_us = seconds * 1e6 / steps
    path = run_dir / event_file_name(MAIN_PID)
    lines = [_header(MAIN_PID, MAIN_PID - 1, "main", t0, wall0)]
    t = 1_500_000  # torch imported 1.5 s after the probe started
    lines.append(f"{TORCH} {t}\n")
    lines.append(f"{MODE} {t + 200_000} 1\n")
    t += 2_500_000  # optimizer construction imports torch._dynamo
    lines.append(f"{LOADER} 0 {json.dumps(LOADER_CONFIG, default=str)}\n")
    first_wait = 900_000  # workers start
    lines.append(f"{EPOCH} 0 {t} {first_wait}\n")
    t += first_wait
    lines.append(f"{BATCH} {t} {first_wait} 35 {BATCH_SIZE}\n")
    last = t
    written = 0
    chunk = 200_000
    for i in range(steps):
        if i and i % EPOCH_STEPS == 0:
            lines.append(f"{EPOCH} 0 {last} {int(period_us * 3)}\n")
        if i and i % EVAL_EVERY == 0:
            lines.append(f"{MODE} {last} 0\n")
            lines.append(f"{MODE} {last + int(period_us * 20)} 1\n")
        dur = int(period_us * (0.9 + 0.2 * rng.random()))
        wait = int(dur * 0.05 * rng.random())
        t = last + dur
        lines.append(f"{STEP} {t} {dur} {wait} {30 + (i & 15)} {BATCH_SIZE} 1 {BATCH_SIZE}\n")
        last = t
        if i and i % SAVE_EVERY == 0:
            ckpt = json.dumps(f"checkpoints/step-{i}.pt")
            lines.append(f"{SAVE} {last} 1800000 94371840 {ckpt}\n")
        if len(lines) >= chunk:
            written += _write_lines(path, lines)
            lines = []
    return written + _write_lines(path, lines)


def write_worker_events(run_dir: Path, steps: int, seconds: float, t0: float, wall0: float) -> int:
    """Persistent workers: a header and the fetch counter written when the worker exits."""
    total = 0
    for k in range(WORKERS):
        pid = MAIN_PID + 1 + k
        fetches = steps // WORKERS
        lines = [
            _header(pid, MAIN_PID, "worker", t0, wall0, worker_id=k, parent_pid=MAIN_PID),
            f"{FETCH} {int(seconds * 1e6)} {fetches} {int(fetches * 41_000)}\n",
        ]
        total += _write_lines(run_dir / event_file_name(pid), lines)
    return total


def _proc_row(
    pid: int, ppid: int, name: str, cpu: float | None, rss: int, fds: int
) -> dict[str, Any]:
    return {
        "pid": pid,
        "ppid": ppid,
        "name": name,
        "cpu": cpu,
        "rss": rss,
        "uss": rss - 61_000_000,
        "fds": fds,
        "threads": 7 if name == "python" else 3,
        "nofile": [1024, 1048576],
    }


def samples_ticks(hours: float, interval: float = DEFAULT_INTERVAL_S) -> int:
    elapsed, k = 0.0, 0
    while elapsed < hours * 3600:
        elapsed += sample_interval(elapsed, interval, adaptive=True)
        k += 1
    return k


def write_samples(run_dir: Path, hours: float, interval: float, t_start: float, seed: int) -> int:
    """The rows ``SamplerLoop`` writes: compacted by its ``RowCompactor``, at the runner's
    default schedule (``interval`` at first, wider after ten minutes)."""
    rng = random.Random(seed)
    gib = 1 << 30
    mem_total, shm_total = 64 * gib, 32 * gib
    gpu = {"unavailable": "no NVIDIA driver (NVML not found)"}
    path = run_dir / "samples.jsonl"
    compactor = RowCompactor()
    written = 0
    lines: list[str] = []
    elapsed, k = 0.0, 0
    while elapsed < hours * 3600:
        t = round(t_start + elapsed, 3)
        first = k == 0
        drift = k * 40  # a slow leak: 40 bytes per tick
        procs = [
            _proc_row(MAIN_PID, MAIN_PID - 1, "python", None if first else round(95 + 10 * rng.random(), 1),
                      2_400_000_000 + drift + rng.randrange(4096) * 4096, 48),
        ] + [
            _proc_row(MAIN_PID + 1 + w, MAIN_PID, "pt_data_worker", None if first else round(40 + 20 * rng.random(), 1),
                      900_000_000 + rng.randrange(4096) * 4096, 21)
            for w in range(WORKERS)
        ]  # fmt: skip
        row = {
            "t": t,
            "procs": procs,
            "cpu": round(60 + 30 * rng.random(), 1),
            "mem": {"total": mem_total, "available": 40 * gib - drift, "used": 24 * gib + drift},
            "swap": {
                "total": 0,
                "used": 0,
                "in_bps": None if first else 0.0,
                "out_bps": None if first else 0.0,
            },
            "shm": {"total": shm_total, "used": 300_000_000 + rng.randrange(1000) * 4096},
            "gpu": gpu,
        }
        lines.append(json.dumps(compactor.compact(row), separators=(",", ":")) + "\n")
        if len(lines) >= 20000:
            written += _write_lines(path, lines)
            lines = []
        elapsed += sample_interval(elapsed, interval, adaptive=True)
        k += 1
    return written + _write_lines(path, lines)


def generate(
    run_dir: Path, steps: int = 1_000_000, hours: float = 24.0, seed: int = 1
) -> dict[str, Any]:
    """Write a complete synthetic run directory; returns what was written and how fast."""
    started = time.monotonic()
    run_dir.mkdir(parents=True, exist_ok=True)
    seconds = hours * 3600
    t_launch = 5000.0
    wall0 = 1.7e9
    t0 = t_launch + 0.05
    events = write_events(run_dir, steps, seconds, t0, wall0, seed)
    workers = write_worker_events(run_dir, steps, seconds, t0, wall0)
    samples = write_samples(run_dir, hours, 0.5, t_launch + 0.03, seed)
    meta = {
        "command": ["python3", "train.py", "--epochs", "200"],
        "cwd": ".",
        "run_dir": str(run_dir),
        "usable_cpus": 16,
        "interval_s": None,
        "max_steps": None,
        "timeout_s": None,
        "wall_start": wall0,
        "t_launch": t_launch,
        "pid": MAIN_PID,
        "stacks": {"chunks": [], "pid": MAIN_PID, "error": "synthetic run: no stack samples"},
        "exit_code": 0,
        "signal": None,
        "wall_s": seconds + 6.0,
        "forwarded": [],
        "samples": samples_ticks(hours),
        "output": {"stdout_bytes": 0, "stdout_lines": 0, "stderr_bytes": 0, "stderr_lines": 0},
        "stopped_by": None,
    }  # fmt: skip
    (run_dir / "run.json").write_text(json.dumps(meta, indent=1) + "\n")
    for name in ("stdout.log", "stderr.log"):
        (run_dir / name).write_bytes(b"")
    return {
        "steps": steps,
        "hours": hours,
        "events_bytes": events,
        "worker_events_bytes": workers,
        "samples_bytes": samples,
        "total_bytes": dir_bytes(run_dir),
        "generate_s": time.monotonic() - started,
    }


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir() if p.is_file())


# ---------------------------------------------------------------- analysis, in a fresh process


def _analyze_here(run_dir: str) -> dict[str, Any]:
    from trainprof.analysis.pipeline import analyze
    from trainprof.store.session import Session

    rss_imports = _rss_now()
    t0 = time.perf_counter()
    session = Session.load(run_dir)
    t1 = time.perf_counter()
    metrics, verdict = analyze(session)
    t2 = time.perf_counter()
    out: dict[str, Any] = {
        "load_s": t1 - t0,
        "analyze_s": t2 - t1,
        "peak_rss_bytes": _maxrss(),
        "ru_maxrss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "rss_after_imports_bytes": rss_imports,
        "steps_seen": metrics.total_steps,
        "sample_ticks": len(session.samples),
        "findings": [f.id for f in verdict.findings],
    }
    out.update(_stacks_parse_cost(Path(run_dir)))
    return out


def _stacks_parse_cost(run_dir: Path) -> dict[str, Any]:
    """Seconds to parse the run's stack files again on their own (after the timed analysis),
    so the cost per MB can be scaled to a day of them."""
    files = stack_files(run_dir)
    if not files:
        return {}
    from trainprof.store.stacks import load_spans

    t0 = time.perf_counter()
    spans = sum(len(load_spans(f, 0.0)) for f in files)
    return {
        "stacks_bytes": sum(f.stat().st_size for f in files),
        "stacks_parse_s": time.perf_counter() - t0,
        "stacks_spans": spans,
    }


def stack_files(run_dir: Path) -> list[Path]:
    """py-spy's traces: ``stacks.json`` or the chunks ``stacks-N.json``, gzipped once finished
    (not hang stacks)."""
    return sorted(p for p in run_dir.glob("stacks*.json*") if p.is_file() and _is_trace(p.name))


def _is_trace(name: str) -> bool:
    return name.startswith("stacks") and name.endswith((".json", ".json.gz"))


def _maxrss() -> int:
    """Peak RSS of this process. ``ru_maxrss`` survives ``exec`` on Linux: a child of a big
    parent starts with the parent's peak. ``VmHWM`` belongs to this address space only."""
    hwm = _proc_status_bytes("VmHWM")
    return hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _rss_now() -> int:
    rss = _proc_status_bytes("VmRSS")
    return rss if rss is not None else _maxrss()


def _proc_status_bytes(field: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def analyze_in_subprocess(run_dir: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.longrun", "analyze", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=Path(__file__).resolve().parent.parent,
    )
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


# ---------------------------------------------------------------- the runner's memory, live


def runner_rss(seconds: float, size: str, interval: float = 0.5) -> dict[str, Any]:
    """RSS of a real ``trainprof run`` (the runner process, and its py-spy child) while the
    benchmark loop runs for ``seconds`` at its fastest size."""
    import psutil

    from bench.overhead import LOOP, _clean_env

    with tempfile.TemporaryDirectory(prefix="trainprof-bench-rss-") as tmp:
        run_dir = Path(tmp) / "run"
        cmd = [
            sys.executable, "-m", "trainprof", "run", "--quiet", "--run-dir", str(run_dir),
            str(LOOP), "--sizes", str(size), "--warmup-s", "0", "--measure-s", str(seconds),
        ]  # fmt: skip
        t0 = time.monotonic()
        proc = subprocess.Popen(
            cmd, env=_clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp
        )
        runner = psutil.Process(proc.pid)
        series: list[tuple[float, int, int | None, bool]] = []  # t, runner, py-spy, job alive
        cpu = {"runner": 0.0, "py-spy": 0.0}  # CPU seconds (user + system), last seen
        live_s = 0.0
        while proc.poll() is None:
            try:
                rss = runner.memory_info().rss
                kids = runner.children()
                spy = [c for c in kids if c.name().startswith("py-spy")]
                job_alive = any(c.name().startswith("python") for c in kids)
                spy_rss = spy[0].memory_info().rss if spy else None
                if job_alive:
                    cpu["runner"] = _cpu_s(runner)
                    cpu["py-spy"] = _cpu_s(spy[0]) if spy else cpu["py-spy"]
                    live_s = time.monotonic() - t0
            except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
                break
            series.append((time.monotonic() - t0, rss, spy_rss, job_alive))
            time.sleep(interval)
        out, err = proc.communicate(timeout=120)
        wall = time.monotonic() - t0
        files = {p.name: p.stat().st_size for p in run_dir.iterdir() if p.is_file()}
        report = _read_json(run_dir / "report.json")
        reanalysis = analyze_in_subprocess(run_dir)  # with its stacks.json, as `trainprof report`
    steps = ((report or {}).get("summary") or {}).get("steps") or 0
    live = [s for s in series if s[3]]
    steady = [s for s in live if s[0] >= 5.0] or live
    event_bytes = sum(v for k, v in files.items() if k.startswith("events-"))
    stacks_bytes = sum(v for k, v in files.items() if _is_trace(k))
    return {
        "seconds": seconds,
        "wall_s": wall,
        "exit_code": proc.returncode,
        "steps": steps,
        "runner_rss_max": max((s[1] for s in series), default=None),
        "runner_rss_live_max": max((s[1] for s in live), default=None),
        "runner_rss_first": steady[0][1] if steady else None,
        "runner_rss_last_live": steady[-1][1] if steady else None,
        "runner_rss_slope_mb_per_min": _slope_mb_min([(s[0], s[1]) for s in steady]),
        "pyspy_rss_first": next((s[2] for s in steady if s[2]), None),
        "pyspy_rss_last": next((s[2] for s in reversed(steady) if s[2]), None),
        "pyspy_rss_slope_mb_per_min": _slope_mb_min([(s[0], s[2]) for s in steady if s[2]]),
        "runner_cpu_pct": cpu["runner"] / live_s * 100 if live_s else None,
        "pyspy_cpu_pct": cpu["py-spy"] / live_s * 100 if live_s else None,
        "files": files,
        "stacks_bytes": stacks_bytes,
        "stacks_recorder": stacks_recorder_settings(),
        "event_bytes_per_step": event_bytes / steps if steps else None,
        "analysis": reanalysis,
        "stdout_tail": out.decode(errors="replace")[-300:],
        "error": None if proc.returncode == 0 else err.decode(errors="replace")[-300:],
    }


def stacks_recorder_settings() -> dict[str, Any]:
    """How the runner's py-spy recorder bounds a long run, read from its module (whatever of
    chunk length, full-rate chunks and later rate it has), to scale a short run to a day."""
    try:
        from trainprof.collect.samplers import stacks
    except ImportError:
        return {}
    names = ("DEFAULT_RATE_HZ", "CHUNK_S", "FAST_CHUNKS", "LONG_RUN_RATE_HZ", "KEEP_LAST_CHUNKS")
    return {n: getattr(stacks, n) for n in names if isinstance(getattr(stacks, n, None), int)}


def stacks_day_estimate(
    bytes_per_s: float, seconds: float, rec: dict[str, Any]
) -> dict[str, float]:
    """Bytes of stack files kept after ``seconds`` of run, and the most py-spy holds at once
    (in seconds of recording), given the recorder's settings; the rate is measured at
    ``DEFAULT_RATE_HZ`` and scales with the sampling rate."""
    rate = rec.get("DEFAULT_RATE_HZ") or 50
    chunk = rec.get("CHUNK_S")
    if not chunk:  # one py-spy for the whole run
        return {"bytes": bytes_per_s * seconds, "pyspy_window_s": seconds}
    fast_s = min(seconds, (rec.get("FAST_CHUNKS") or 0) * chunk)
    slow = min(rate, rec.get("LONG_RUN_RATE_HZ") or rate) / rate
    slow_s = seconds - fast_s
    keep = rec.get("KEEP_LAST_CHUNKS")
    if keep is not None:
        slow_s = min(slow_s, keep * chunk)
    return {"bytes": bytes_per_s * (fast_s + slow * slow_s), "pyspy_window_s": float(chunk)}


def _cpu_s(proc: Any) -> float:
    t = proc.cpu_times()
    return float(t.user + t.system)


def _slope_mb_min(points: list[tuple[float, int]]) -> float | None:
    if len(points) < 3:
        return None
    n = len(points)
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    var = sum((p[0] - mx) ** 2 for p in points)
    if var == 0:
        return None
    slope = sum((p[0] - mx) * (p[1] - my) for p in points) / var  # bytes per second
    return slope * 60 / 2**20


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "analyze":
        print(json.dumps(_analyze_here(argv[1])))
        return 0
    if len(argv) >= 2 and argv[0] == "generate":
        steps = int(argv[2]) if len(argv) > 2 else 1_000_000
        hours = float(argv[3]) if len(argv) > 3 else 24.0
        print(json.dumps(generate(Path(argv[1]), steps, hours)))
        return 0
    print("usage: python -m bench.longrun analyze RUN_DIR | generate RUN_DIR [STEPS [HOURS]]")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
