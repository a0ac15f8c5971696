"""The pathology zoo: one small, honest CPU reproduction per rule, plus healthy controls.

Standard library only (no torch import here): `trainprof demo list` reads this registry.
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass

HERE = pathlib.Path(__file__).resolve().parent


@dataclass(frozen=True)
class ZooCase:
    name: str  # file stem
    expect: str | None  # finding id that must be first among warnings/errors; None: healthy
    kind: str  # "slow" | "healthy" | "crash" | "hang"
    summary: str  # one line: what the script does wrong (or right)
    timeout_s: float  # a generous bound for trainprof's --timeout


_CASES = (
    ZooCase(
        "fake_batching",
        "fake-batching",
        "slow",
        "batch_size=1 and a Python loop of next() per step",
        60,
    ),
    ZooCase(
        "input_bound",
        "input-bound",
        "slow",
        "slow __getitem__ in the main process (num_workers=0)",
        60,
    ),
    ZooCase(
        "sampler_overhead",
        "sampler-overhead",
        "slow",
        "a batch sampler re-reading samples every batch",
        60,
    ),
    ZooCase(
        "worker_startup",
        "worker-startup",
        "slow",
        "short epochs with non-persistent, slow-starting workers",
        90,
    ),
    ZooCase("cpu_stall", "cpu-stall", "slow", "a CPU-bound search every 30 steps", 60),
    ZooCase(
        "checkpoint_stall",
        "checkpoint-stall",
        "slow",
        "torch.save of model+optimizer every few steps",
        60,
    ),
    ZooCase("eval_stall", "eval-stall", "slow", "a full validation pass every 20 steps", 60),
    ZooCase(
        "logging_overhead",
        "logging-overhead",
        "slow",
        "per-step printing of tensors and metrics",
        60,
    ),
    ZooCase(
        "loop_overhead", "loop-overhead", "slow", "per-parameter gradient statistics every step", 60
    ),
    ZooCase(
        "memory_growth",
        "memory-growth",
        "slow",
        "an unbounded per-worker cache of decoded samples",
        60,
    ),
    ZooCase(
        "healthy_compute", None, "healthy", "compute-bound training on an in-memory dataset", 60
    ),
    ZooCase(
        "healthy_loader", None, "healthy", "a well-configured loader whose workers keep up", 60
    ),
    ZooCase(
        "crash_ragged",
        "ragged-batch",
        "crash",
        "variable-length samples through the default collate",
        60,
    ),
    ZooCase("crash_shape", "shape-mismatch", "crash", "a shape error right after a batch", 60),
    ZooCase(
        "crash_worker_killed", "worker-killed", "crash", "a DataLoader worker killed by SIGKILL", 60
    ),
    ZooCase(
        "hang_fd_limit",
        "worker-fd-limit",
        "hang",
        "a low open-file limit with the file_descriptor strategy",
        30,
    ),
)

# Only cases whose script is present (the registry never names a file that does not exist).
ZOO: dict[str, ZooCase] = {c.name: c for c in _CASES if (HERE / f"{c.name}.py").is_file()}


def script_path(name: str) -> pathlib.Path:
    return HERE / f"{name}.py"
