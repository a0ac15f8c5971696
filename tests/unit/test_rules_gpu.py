"""CUDA and multi-rank rules on synthetic sessions (this machine has no GPU; a lent GPU
machine runs tests/gpu for real)."""

from __future__ import annotations

import json

from synth import DEFAULT_LOADER, process, session

from trainprof.analysis.pipeline import analyze
from trainprof.store.events import ProcessLog

A100 = {
    "device": "cuda",
    "dtype": "float32",
    "matmul_precision": "highest",
    "cuda_matmul_tf32": False,
    "cudnn_tf32": True,
    "capability": [8, 0],
    "gpu_name": "NVIDIA A100",
}


def cuda_process(
    precision: dict[str, object] = A100, autocast: str | None = None, **kw: object
) -> ProcessLog:
    log = process(100, **kw)  # type: ignore[arg-type]
    log.add_line("X " + json.dumps({"t": 1, "precision": precision}))
    if autocast:
        log.add_line("X " + json.dumps({"t": 2, "autocast": "cuda", "dtype": autocast}))
    return log


def ids(log: ProcessLog) -> list[str]:
    return [f.id for f in analyze(session(log))[1].findings]


def test_fp32_on_ampere_without_autocast_is_named_with_tf32() -> None:
    loader = dict(DEFAULT_LOADER, pin_memory=True)
    _, verdict = analyze(session(cuda_process(loader=loader)))
    (f,) = verdict.findings
    assert f.id == "no-mixed-precision"
    assert "TF32 is off" in f.evidence[1]
    assert any("bfloat16" in fx for fx in f.fix)


def test_autocast_seen_means_no_finding() -> None:
    loader = dict(DEFAULT_LOADER, pin_memory=True)
    assert ids(cuda_process(autocast="torch.bfloat16", loader=loader)) == []


def test_pre_tensor_core_gpu_is_left_alone() -> None:
    loader = dict(DEFAULT_LOADER, pin_memory=True)
    old = dict(A100, capability=[6, 1], gpu_name="GTX 1080")
    assert ids(cuda_process(old, loader=loader)) == []


def test_pageable_memory_on_cuda_only() -> None:
    assert "pageable-memory" in ids(cuda_process(autocast="torch.float16"))
    cpu = dict(A100, device="cpu")
    assert "pageable-memory" not in ids(cuda_process(cpu))


def test_cpu_job_skips_cuda_rules_with_a_reason() -> None:
    _, verdict = analyze(session(process(100)))
    reasons = {s.id: s.reason for s in verdict.skipped}
    assert reasons["no-mixed-precision"] == "the model does not train on a CUDA device"
    assert reasons["straggler-rank"] == "not a multi-rank (torchrun) job"


def test_straggler_rank_by_data_wait() -> None:
    ranks = []
    for r in range(4):
        log = process(100, step_s=0.1, wait_s=0.05 if r == 2 else 0.005, pid=1000 + r)
        log.header.update(role="rank", rank=r)
        ranks.append(log)
    _, verdict = analyze(session(*ranks))
    f = next(f for f in verdict.findings if f.id == "straggler-rank")
    assert f.title.startswith("Rank 2 waits")


def test_even_ranks_are_not_stragglers() -> None:
    ranks = []
    for r in range(2):
        log = process(100, step_s=0.1, wait_s=0.01, pid=1000 + r)
        log.header.update(role="rank", rank=r)
        ranks.append(log)
    assert "straggler-rank" not in [f.id for f in analyze(session(*ranks))[1].findings]


def test_host_sync_names_the_line_that_syncs() -> None:
    from trainprof.store.stacks import StackSpan

    log = cuda_process(autocast="torch.bfloat16", loader=dict(DEFAULT_LOADER, pin_memory=True))
    s = session(log)
    train = "/home/user/proj/train.py"
    s.source = {(train, 30): "running.append(loss.item())", (train, 25): "out = model(x)"}
    t0 = 100.0 + 2.5  # inside the steady window
    s.spans = [
        StackSpan(t0 + i * 0.1, t0 + i * 0.1 + 0.04, (("<module>", train, 40), ("main", train, 30)))
        for i in range(60)
    ] + [
        StackSpan(
            t0 + i * 0.1 + 0.04, t0 + i * 0.1 + 0.1, (("<module>", train, 40), ("main", train, 25))
        )
        for i in range(60)
    ]
    _, verdict = analyze(s)
    f = next(f for f in verdict.findings if f.id == "host-sync")
    assert f.where == f"{train}:30 (main)"
    assert f.impact is not None and 0.35 < f.impact < 0.45


def test_straggler_among_two_ranks() -> None:
    ranks = []
    for r in range(2):
        log = process(100, step_s=0.04, wait_s=0.03 if r == 1 else 0.0005, pid=1000 + r)
        log.header.update(role="rank", rank=r)
        ranks.append(log)
    f = next(f for f in analyze(session(*ranks))[1].findings if f.id == "straggler-rank")
    assert f.title.startswith("Rank 1 waits")
