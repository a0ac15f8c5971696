"""Rules for CUDA jobs and torchrun ranks: mixed precision, pinned memory, host syncs,
stragglers. They read what the probe saw at the first optimizer step (device, dtype, TF32
settings), which autocast contexts the job entered, and the ranks' own step records."""

from __future__ import annotations

from trainprof.analysis.attribution import where
from trainprof.analysis.checks_loader import ms, primary_loader
from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics

# Tensor Cores (fp16) arrived with compute capability 7.0; bf16 and TF32 with 8.0 (Ampere).
TENSOR_CORES = (7, 0)
AMPERE = (8, 0)
# host-sync: main-thread time on lines that copy device tensors to the host.
SYNC_SHARE = 0.10
# straggler-rank: one rank waits for data this share of a step more than the median rank.
STRAGGLER_EXTRA_WAIT = 0.20


def on_cuda(m: Metrics) -> bool:
    p = m.activity.precision
    return p is not None and p.get("device") == "cuda"


def _capability(m: Metrics) -> tuple[int, int] | None:
    cap = (m.activity.precision or {}).get("capability")
    return (int(cap[0]), int(cap[1])) if cap and len(cap) == 2 else None


def check_no_mixed_precision(m: Metrics) -> Finding | None:
    p = m.activity.precision or {}
    cap = _capability(m)
    if p.get("dtype") != "float32" or cap is None or cap < TENSOR_CORES:
        return None
    if any(a.startswith("cuda") for a in m.activity.autocast):
        return None
    ampere = cap >= AMPERE
    tf32_off = p.get("matmul_precision") == "highest" and not p.get("cuda_matmul_tf32")
    evidence = [
        f"parameters are float32 on {p.get('gpu_name', 'the GPU')} (compute capability "
        f'{cap[0]}.{cap[1]}), and no torch.autocast("cuda") context was entered',
    ]
    if ampere and tf32_off:
        evidence.append(
            "TF32 is off too (torch.get_float32_matmul_precision() == 'highest'): "
            "fp32 matmuls run without Tensor Cores"
        )
    dtype = "torch.bfloat16" if ampere else "torch.float16"
    fix = [f'with torch.autocast("cuda", dtype={dtype}): around the forward pass and the loss']
    if not ampere:
        fix.append(
            "with float16, scale the loss: scaler = torch.amp.GradScaler(); scaler.scale(loss).backward()"
        )
    if ampere:
        fix.append('torch.set_float32_matmul_precision("high") enables TF32 for what stays in fp32')
    return Finding(
        id="no-mixed-precision",
        severity="warning",
        title="Training runs entirely in fp32 on a GPU with Tensor Cores",
        evidence=tuple(evidence),
        fix=tuple(fix),
        impact=None,
    )


def check_pageable_memory(m: Metrics) -> Finding | None:
    loader = primary_loader(m)
    if loader is None or loader.config.get("pin_memory"):
        return None
    return Finding(
        id="pageable-memory",
        severity="warning",
        title="Batches are copied to the GPU from pageable host memory",
        evidence=(
            "the model trains on CUDA and the DataLoader has pin_memory=False: every host→device "
            "copy is staged through a pinned buffer and cannot overlap with compute",
        ),
        fix=("DataLoader(..., pin_memory=True) and batch.to(device, non_blocking=True)",),
        impact=None,
    )


def check_host_sync(m: Metrics) -> Finding | None:
    share = m.activity.sync_share
    if share is None or share < SYNC_SHARE or m.activity.window is None:
        return None
    frame = m.activity.sync_frame
    return Finding(
        id="host-sync",
        severity="warning",
        title=f"Per-step device→host syncs hold the main thread {share:.0%} of the loop",
        evidence=(
            f"{share:.0%} of main-thread time is on lines calling .item()/.cpu()/.tolist()/"
            ".numpy(): each waits for every queued GPU kernel, so the CPU cannot run ahead",
        ),
        fix=(
            "accumulate metrics on the device (running_loss += loss.detach()) and call .item() "
            "every N steps",
            "find the syncs: torch.cuda.set_sync_debug_mode('warn') for a few steps",
        ),
        impact=share,
        where=where(frame),
    )


def check_straggler_rank(m: Metrics) -> Finding | None:
    ranks = m.activity.ranks
    if len(ranks) < 2:
        return None
    slow = max(ranks, key=lambda r: r.wait_per_step_s)
    others = sorted(r.wait_per_step_s for r in ranks if r is not slow)
    typical = others[len(others) // 2]  # the median of the other ranks
    step = slow.p50_s
    if step <= 0 or (slow.wait_per_step_s - typical) / step < STRAGGLER_EXTRA_WAIT:
        return None
    extra = slow.wait_per_step_s - typical
    return Finding(
        id="straggler-rank",
        severity="warning",
        title=f"Rank {slow.rank} waits for data {ms(extra)} per step longer than the others",
        evidence=(
            f"data wait per step: rank {slow.rank} {ms(slow.wait_per_step_s)}, the median rank "
            f"{ms(typical)} (step p50 {ms(step)})",
            "in synchronous data-parallel training every rank waits for the slowest at each "
            "gradient all-reduce",
        ),
        fix=(
            "give that rank's loader more workers or check its node (disk, CPU quota, noisy neighbours)",
            "balance the data: DistributedSampler with equal shard sizes, drop_last=True",
        ),
        impact=min(1.0, extra / step),
    )
