"""attach's host-loop rules from stacks alone: per-step logging, other loop code and the
sampler are named with their share of the sampled time; on a GPU job (NVML lists a process of
the job on the GPU) host time the busy GPU hides costs nothing, as under `trainprof run`. Its
memory-growth tells a leak only over a long enough look."""

from __future__ import annotations

from typing import Any

from synth import session

from trainprof.analysis.findings import Finding
from trainprof.analysis.pipeline import analyze
from trainprof.store.session import Session
from trainprof.store.stacks import StackSpan

TRAIN = "/home/user/proj/train.py"
TORCH = "/venv/site-packages/torch"
FORWARD = (("<module>", TRAIN, 20), ("Module._call_impl", f"{TORCH}/nn/modules/module.py", 1))
BACKWARD = (("<module>", TRAIN, 22), ("backward", f"{TORCH}/autograd/__init__.py", 1))
OPTIMIZER = (("<module>", TRAIN, 23), ("SGD.step", f"{TORCH}/optim/sgd.py", 1))
PRINTING = (
    ("<module>", TRAIN, 25),
    ("Tensor.__format__", f"{TORCH}/_tensor.py", 1),
    ("_str", f"{TORCH}/_tensor_str.py", 1),
)
STATS = (("<module>", TRAIN, 27), ("grad_stats", TRAIN, 40))
LOADER = (
    ("<module>", TRAIN, 18),
    ("_SingleProcessDataLoaderIter._next_data", f"{TORCH}/utils/data/dataloader.py", 1),
    ("Images.__getitem__", TRAIN, 60),
)


SAMPLER = (
    ("<module>", TRAIN, 18),
    ("_BaseDataLoaderIter._next_index", f"{TORCH}/utils/data/dataloader.py", 1),
    ("PKSampler.__iter__", TRAIN, 80),
    ("modality_of", TRAIN, 90),
)


def attached(
    extra: tuple[tuple[tuple[str, str, int], ...], float],
    gpu_util: float | None,
    listed: bool = True,
) -> Session:
    """3 s of 10 ms steps sampled at 100 Hz: forward, backward and the optimizer, then
    ``extra`` (frames, seconds) each step. With ``gpu_util``, the machine's one GPU is that
    busy, and NVML lists the job's process on it if ``listed``."""
    frames, extra_s = extra
    spans, t = [], 0.0
    for _ in range(300):
        for d, f in ((0.002, FORWARD), (0.003, BACKWARD), (0.001, OPTIMIZER), (extra_s, frames)):
            spans.append(StackSpan(t, t + d, f))
            t += d
    rows: list[dict[str, Any]] = []
    for i in range(4):
        row: dict[str, Any] = {"t": float(i), "procs": [{"pid": 1000, "rss": 1e8}]}
        if gpu_util is not None:
            row["gpu"] = [{"index": 0, "util": gpu_util, "procs": {"1000": 1e9} if listed else {}}]
        rows.append(row)
    sess = session(attach={"pid": 1000, "rate_hz": 100}, sample_rows=rows)
    sess.spans = spans
    return sess


def found(sess: Session, rule: str) -> Finding | None:
    return next((f for f in analyze(sess)[1].findings if f.id == rule), None)


def test_logging_is_named_with_its_share_and_line() -> None:
    f = found(attached((PRINTING, 0.004), None), "logging-overhead")
    assert f is not None and f.impact is not None and abs(f.impact - 0.4) < 0.03
    assert f.where == f"{TRAIN}:25 (<module>)"
    assert "not counted: attach does not see the job's output" in f.evidence[1]


def test_other_loop_code_is_named_at_its_function() -> None:
    f = found(attached((STATS, 0.004), None), "loop-overhead")
    assert f is not None and f.where == f"{TRAIN}:40 (grad_stats)"


def test_a_busy_gpu_hides_the_host_work() -> None:
    """The same loop on a GPU NVML shows 97 % busy with the job on it: the host's printing
    overlaps the GPU's work and costs nothing."""
    assert found(attached((PRINTING, 0.004), 97.0), "logging-overhead") is None
    assert found(attached((STATS, 0.004), 97.0), "loop-overhead") is None
    assert found(attached((LOADER, 0.004), 97.0), "input-bound") is None
    assert found(attached((LOADER, 0.004), None), "input-bound") is not None


def test_on_a_gpu_idle_part_of_the_time_the_cost_is_that_idle_time() -> None:
    f = found(attached((PRINTING, 0.004), 80.0), "logging-overhead")
    assert f is not None and f.impact is not None and abs(f.impact - 0.2) < 0.02
    assert "the GPU sat idle 20% of a step" in f.evidence[-1]


def test_without_the_job_on_the_gpus_list_its_gpu_is_not_assumed() -> None:
    """NVML lists no process of the job (a container's PID namespace): a busy GPU may be
    another job's, so nothing is waived."""
    assert found(attached((PRINTING, 0.004), 97.0, listed=False), "logging-overhead") is not None


def test_the_samplers_time_is_its_own_finding_not_input_bound() -> None:
    """As under `run`: input-bound is the wait beyond the sampler, and a sampler that works in
    the main process is sampler-overhead, named at its hot line (once called input-bound,
    5 % of the time, with the sampler's 40 % in its title)."""
    f = found(attached((SAMPLER, 0.004), None), "sampler-overhead")
    assert f is not None and f.impact is not None and abs(f.impact - 0.4) < 0.03
    assert f.where == f"{TRAIN}:80 (PKSampler.__iter__)"
    assert f.hotspot == f"{TRAIN}:90 (modality_of)"
    assert found(attached((SAMPLER, 0.004), None), "input-bound") is None
    assert found(attached((SAMPLER, 0.004), 97.0), "sampler-overhead") is None


def memory(seconds: int, mib_per_s: float) -> Session:
    """attach's host samples of the main process, a second apart, its RSS rising."""
    rows = [
        {"t": float(i), "procs": [{"pid": 1000, "rss": (300 + mib_per_s * i) * 2**20}]}
        for i in range(seconds + 1)
    ]
    sess = session(attach={"pid": 1000, "rate_hz": 100}, sample_rows=rows)
    sess.spans = [StackSpan(0.01 * i, 0.01 * (i + 1), FORWARD) for i in range(100 * seconds)]
    return sess


def test_a_short_rise_in_memory_is_information_not_a_leak() -> None:
    """A job attached 4 s after it started rose 332 → 391 MiB in 3 s: a phase that allocates
    looks the same over so short a look; it was told it would run out of memory in 20 min."""
    short = found(memory(5, 20.0), "memory-growth")
    assert short is not None and short.severity == "info"
    assert "RSS 300 → 400 MiB over 5 s" in short.evidence[0]
    assert not any("run out" in e for e in short.evidence)
    assert "--duration 30" in short.fix[0]
    long = found(memory(12, 20.0), "memory-growth")
    assert long is not None and long.severity in ("warning", "error")
    assert found(memory(12, 0.0), "memory-growth") is None


def test_a_quarter_second_of_stacks_is_too_little_to_judge() -> None:
    """A job that exited 0.25 s into the attach was called input-bound from 50 samples."""
    sess = attached((LOADER, 0.004), None)
    sess.spans = [sp for sp in sess.spans if sp.t1 <= 0.25]
    _m, verdict = analyze(sess)
    assert not [f for f in verdict.findings if f.severity != "info"]
    skipped = {s.id: s.reason for s in verdict.skipped}
    assert skipped["input-bound"].startswith("too little was sampled to judge (2")
