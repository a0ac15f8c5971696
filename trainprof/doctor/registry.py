"""Runs every doctor check: gathers concurrently, judges purely, returns one report.

The torch probe subprocess starts first (its ~1 s import is the long pole); the slow gatherers
(swap sampling, the live py-spy attach, NVML, the dataset read) run in threads meanwhile and
the cheap ones in this thread. A gatherer that raises becomes a warning row, never a traceback.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from trainprof.doctor import cpu, disk, gpu, limits, memory, ptrace, shm, swap, torch_env
from trainprof.doctor.base import AREAS, CheckResult, result
from trainprof.doctor.cgroup import CgroupLimits, gather_cgroup
from trainprof.doctor.envvars import visible_env
from trainprof.doctor.nvml import gather_nvml
from trainprof.version import __version__

SCHEMA = "trainprof.doctor/1"
Rows = list[CheckResult]


@dataclass(frozen=True)
class DoctorOptions:
    workers: int | None = None
    batch_mb: float | None = None
    ckpt_dir: Path | None = None
    data: Path | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "workers": self.workers,
            "batch_mb": self.batch_mb,
            "ckpt_dir": None if self.ckpt_dir is None else str(self.ckpt_dir),
            "data": None if self.data is None else str(self.data),
        }


@dataclass(frozen=True)
class DoctorReport:
    checks: tuple[CheckResult, ...]
    env: dict[str, str]  # allowlisted variables only
    elapsed_s: float
    options: DoctorOptions

    def counts(self) -> dict[str, int]:
        out = {"ok": 0, "warn": 0, "fail": 0}
        for c in self.checks:
            out[c.status] += 1
        return out

    def exit_code(self, strict: bool = False) -> int:
        """1 when a check fails (with ``strict``, when one warns too), else 0."""
        n = self.counts()
        return 1 if n["fail"] or (strict and n["warn"]) else 0

    def to_json(self, strict: bool = False) -> dict[str, object]:
        return {
            "schema": SCHEMA,
            "trainprof_version": __version__,
            "checks": [c.to_json() for c in self.checks],
            "summary": self.counts(),
            "exit_code": self.exit_code(strict),
            "strict": strict,
            "elapsed_s": round(self.elapsed_s, 3),
            "env": self.env,
            "options": self.options.to_json(),
        }


def _guard(area: str, check_id: str, fn: Callable[[], Rows | CheckResult]) -> Rows:
    try:
        out = fn()
    except Exception as exc:  # a check of the machine must never crash the doctor
        return [
            result(
                area,
                "warn",
                check_id,
                f"could not run this check ({type(exc).__name__})",
                (str(exc)[:200],),
                ("report it as a trainprof bug, with this line",),
            )
        ]
    return out if isinstance(out, list) else [out]


def _future_rows(area: str, check_id: str, fut: Future[CheckResult]) -> Rows:
    return _guard(area, check_id, fut.result)


def run_doctor(
    opts: DoctorOptions,
    environ: Mapping[str, str] | None = None,
    torch_python: Sequence[str] = (sys.executable,),
    live_attach: bool = True,
) -> DoctorReport:
    """Gather and judge everything; ``torch_python`` is the interpreter the probe runs in."""
    start = time.perf_counter()
    environ = os.environ if environ is None else environ
    env = visible_env(environ)
    probe = torch_env.TorchProbe(torch_python, env=environ)
    rows: Rows = []
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="doctor") as pool:
        swap_f = pool.submit(lambda: swap.check_swap(swap.gather_swap()))
        nvml_f = pool.submit(gather_nvml)
        attach_f = pool.submit(lambda: ptrace.check_ptrace(ptrace.gather_ptrace(live_attach)))
        data = opts.data
        data_f = (
            pool.submit(lambda: disk.check_data_read(disk.gather_data_read(data)))
            if data is not None
            else None
        )

        try:
            limits_cg = gather_cgroup()
        except OSError:  # e.g. an unreadable cgroupfs: judge as if no limits were set
            limits_cg = CgroupLimits(None, None, None, None, None, None)
        cpu_in = cpu.gather_cpu(limits_cg.cpu_quota, limits_cg.cpu_source, opts.workers)
        usable = cpu.usable_cpus(cpu_in)
        load_f = pool.submit(lambda: cpu.check_load(cpu.gather_load(usable)))
        # One worker count for every row that needs one: --workers, else the cpu row's advice.
        assumed = opts.workers is None
        workers = cpu.suggested_workers(usable) if opts.workers is None else opts.workers
        rows += _guard(
            "shm",
            "shm-small",
            lambda: shm.check_shm(
                shm.gather_shm(workers=workers, batch_mb=opts.batch_mb, workers_assumed=assumed)
            ),
        )
        rows += _guard("cpu", "cpu-quota", lambda: cpu.check_cpu(cpu_in))
        rows += _guard(
            "memory", "memory-limit", lambda: memory.check_memory(memory.gather_memory(limits_cg))
        )
        ckpt = opts.ckpt_dir if opts.ckpt_dir is not None else Path(".")
        rows += _guard("disk", "ckpt-disk-low", lambda: disk.check_ckpt(disk.gather_ckpt(ckpt)))

        facts = probe.result()
        rows += _guard(
            "limits",
            "nofile-low",
            lambda: limits.check_nofile(
                limits.gather_nofile(workers, assumed, facts.sharing_strategy)
            ),
        )
        rows += _guard(
            "cpu",
            "thread-oversubscription",
            lambda: cpu.check_threads(
                cpu.ThreadInputs(
                    usable=usable,
                    env_threads={k: v for k, v in env.items() if k in cpu.THREAD_VARS},
                    torch_threads=facts.num_threads,
                    workers=opts.workers,
                )
            ),
        )
        rows += _guard("torch", "torch-missing", lambda: torch_env.check_torch(facts))
        rows += _guard("torch", "launch-blocking", lambda: torch_env.check_launch_blocking(env))
        rows += _guard(
            "gpu", "gpu-unavailable", lambda: gpu.check_gpus(nvml_f.result(), facts, env)
        )
        rows += _future_rows("cpu", "cpu-load", load_f)
        rows += _future_rows("memory", "swap-active", swap_f)
        rows += _future_rows("attach", "ptrace-blocked", attach_f)
        if data_f is not None:
            rows += _future_rows("disk", "data-read-slow", data_f)

    order = {area: i for i, area in enumerate(AREAS)}
    ranked = sorted(rows, key=lambda r: order.get(r.area, len(order)))
    return DoctorReport(tuple(ranked), env, time.perf_counter() - start, opts)
