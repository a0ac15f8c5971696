"""MFU on CPU: the precision and peak tables, and the low-mfu and batch-memory-headroom rules on
synthetic sessions with a FLOP count and timed steps (a lent GPU machine runs tests/gpu)."""

from __future__ import annotations

import json

import pytest
from synth import DEFAULT_LOADER, process, session

from trainprof.analysis.mfu import peak_tflops, precision_in_use
from trainprof.analysis.pipeline import analyze
from trainprof.store.session import Session

GiB = 2**30
H100 = {
    "device": "cuda",
    "dtype": "float32",
    "matmul_precision": "highest",
    "cuda_matmul_tf32": False,
    "capability": [9, 0],
    "gpu_name": "NVIDIA H100 80GB HBM3",
    "memory_total": 80 * GiB,
}


@pytest.mark.parametrize(
    ("name", "prec", "peak"),
    [
        ("NVIDIA H100 80GB HBM3", "bf16", 989.4),
        ("NVIDIA H100 PCIe", "bf16", 756.0),
        ("NVIDIA H200", "tf32", 494.7),
        ("NVIDIA A100-SXM4-80GB", "fp32", 19.5),
        ("NVIDIA L4", "bf16", 121.0),
        ("NVIDIA L40S", "bf16", 362.0),
        ("Tesla V100-SXM2-16GB", "fp16", 125.0),
        ("NVIDIA A10G", "bf16", None),  # not NVIDIA's A10: no guessed peak
        ("NVIDIA L40", "bf16", None),  # not an L4
        ("NVIDIA GeForce RTX 4090", "bf16", None),
    ],
)
def test_peaks_match_whole_words_only(name: str, prec: str, peak: float | None) -> None:
    assert peak_tflops(name, prec) == peak


def test_precision_in_use() -> None:
    assert precision_in_use(H100, ()) == "fp32"
    assert precision_in_use(dict(H100, matmul_precision="high"), ()) == "tf32"
    assert precision_in_use(dict(H100, capability=[7, 0], matmul_precision="high"), ()) == "fp32"
    assert precision_in_use(H100, ("cuda:torch.bfloat16",)) == "bf16"
    assert precision_in_use(H100, ("cpu:torch.bfloat16",)) == "fp32"
    assert precision_in_use(dict(H100, dtype="float16"), ()) == "fp16"


def gpu_job(
    flops: dict[str, object] | None,
    precision: dict[str, object] = H100,
    util: float = 97.0,
    gap_ms: float = 0.5,
    wait_s: float = 0.0,
    peak_alloc: int = 6 * GiB,
) -> Session:
    """200 steps of 20 ms (50 it/s) on a GPU, every 16th timed: 9 ms forward, 8 backward, 2
    optimizer, ``gap_ms`` idle; 3 GiB held between steps, ``peak_alloc`` at the peak."""
    log = process(200, step_s=0.02, wait_s=wait_s, loader=dict(DEFAULT_LOADER, pin_memory=True))
    log.add_line("X " + json.dumps({"t": 1, "precision": precision}))
    log.add_line("X " + json.dumps({"t": 1, "autocast": "cuda", "dtype": "torch.bfloat16"}))
    if flops is not None:
        log.add_line("X " + json.dumps({"t": 2, "flops": flops}))
    for i in range(16, 200, 16):
        t = log.steps["t"][i]
        dev = f"9000 8000 2000 {int(gap_ms * 1e3)}"
        mem = f"{3 * GiB} {peak_alloc + GiB} {peak_alloc}"
        log.add_line(f"G {t} {i} {dev} 5000 8000 2000 {int(gap_ms * 1e3)} {mem}")
    rows = [{"t": 100.0 + i, "procs": [], "gpu": [{"index": 0, "util": util}]} for i in range(8)]
    return session(log, sample_rows=rows)


COUNTED = {"step": 2, "steps": 1, "per_step": 2 * 10**12, "failed_ops": 0}  # 2 TFLOP a step


def test_mfu_from_one_counted_step_at_the_steady_rate() -> None:
    m, verdict = analyze(gpu_job(COUNTED))
    assert m.mfu is not None and m.mfu.precision == "bf16" and m.mfu.peak_tflops == 989.4
    assert m.mfu.achieved_tflops == pytest.approx(100.0, rel=0.02)  # 2 TFLOP × 50 it/s
    assert m.mfu.mfu == pytest.approx(100.0 / 989.4, rel=0.02)
    f = next(f for f in verdict.findings if f.id == "low-mfu")
    assert f.severity == "info" and "MFU 10.1%" in f.evidence[0]
    assert m.warmup_steps >= 2, "the counted step is warm-up, not a statistic"


def test_the_counted_step_is_left_out_even_of_a_short_run() -> None:
    log = process(30, step_s=0.05)
    log.add_line("X " + json.dumps({"t": 1, "precision": H100}))
    log.add_line("X " + json.dumps({"t": 2, "flops": dict(COUNTED, step=2, steps=2)}))
    m, _verdict = analyze(session(log))
    assert m.warmup_steps == 3  # steps 2 and 3 ran under the counter


def test_high_mfu_and_a_gpu_that_waits_for_data_get_no_mfu_finding() -> None:
    high = dict(COUNTED, per_step=12 * 10**12)  # 600 TFLOP/s: 61 %
    assert "low-mfu" not in {f.id for f in analyze(gpu_job(high))[1].findings}
    m, verdict = analyze(gpu_job(COUNTED, util=30.0, gap_ms=14.0, wait_s=0.014))
    assert m.bottleneck is not None and m.bottleneck.verdict == "input-bound"
    assert "low-mfu" not in {f.id for f in verdict.findings}


def test_mfu_is_skipped_with_the_reason_it_was_not_counted() -> None:
    skipped = {"skipped": "the job uses torch.compile (counting would make it recompile)"}
    m, verdict = analyze(gpu_job(skipped))
    reasons = {s.id: s.reason for s in verdict.skipped}
    assert m.mfu is None and "torch.compile" in reasons["low-mfu"]
    unknown = dict(H100, gpu_name="NVIDIA GeForce RTX 4090")
    m, verdict = analyze(gpu_job(COUNTED, precision=unknown))
    assert m.mfu is not None and m.mfu.mfu is None and m.mfu.achieved_tflops > 0
    reasons = {s.id: s.reason for s in verdict.skipped}
    assert reasons["low-mfu"] == "no dense peak known for NVIDIA GeForce RTX 4090 in bf16"
    _m, cpu = analyze(session(process(100)))
    assert {s.id: s.reason for s in cpu.skipped}["low-mfu"].startswith("the model does not")


def test_memory_headroom_names_how_much_more_batch_fits() -> None:
    _m, verdict = analyze(gpu_job(COUNTED))
    f = next(f for f in verdict.findings if f.id == "batch-memory-headroom")
    assert f.title == "The job uses 9% of the GPU's memory"
    # (0.85 × 80 − 3 held) / (6 peak − 3 held) ≈ 21× the batch of 32; try 16×
    assert "about 21× the batch would fit" in f.evidence[1]
    assert "batch_size=512 (16×)" in f.fix[0]


def test_memory_headroom_quiet_when_memory_is_used_or_the_gpu_waits_for_data() -> None:
    full = gpu_job(COUNTED, peak_alloc=40 * GiB)
    assert "batch-memory-headroom" not in {f.id for f in analyze(full)[1].findings}
    starved = gpu_job(COUNTED, util=30.0, gap_ms=14.0, wait_s=0.014)
    assert "batch-memory-headroom" not in {f.id for f in analyze(starved)[1].findings}
    no_total = gpu_job(COUNTED, precision={k: v for k, v in H100.items() if k != "memory_total"})
    reasons = {s.id: s.reason for s in analyze(no_total)[1].skipped}
    assert reasons["batch-memory-headroom"] == "CUDA memory not read (no timed steps)"


def ranks_job(world_size: int, backend: str) -> Session:
    """The MFU job as rank 0 of ``world_size``, its probe having seen DDP's process group."""
    s = gpu_job(COUNTED)
    primary = s.primary
    assert primary is not None
    primary.header["world_size"] = world_size
    collectives = {"s": 0.0, "n": 0, "ddp_s": 0.5, "ddp_n": 200, "backend": backend}
    primary.add_line("X " + json.dumps({"t": 3_000_000, "collectives": collectives}))
    return s


def test_an_nccl_jobs_busy_gpu_includes_its_collectives_and_says_so() -> None:
    """With NCCL the compute stream waits for the all-reduce inside the step and NCCL's kernels
    count as utilization: 'gpu-bound' then holds communication too, which is not measured
    apart. The verdict and low-mfu say so instead of presenting it all as math."""
    m, verdict = analyze(ranks_job(8, "nccl"))
    assert m.bottleneck is not None and m.bottleneck.verdict == "gpu-bound"
    assert "nccl collectives included, not measured apart" in m.bottleneck.reason
    f = next(f for f in verdict.findings if f.id == "low-mfu")
    assert any("nccl collectives" in e for e in f.evidence)
    assert any("on one GPU" in x for x in f.fix)


@pytest.mark.parametrize(("world", "backend"), [(1, "nccl"), (8, "gloo")])
def test_one_process_or_a_host_backend_has_no_collectives_in_the_gpus_time(
    world: int, backend: str
) -> None:
    m, verdict = analyze(ranks_job(world, backend))
    assert m.bottleneck is not None and "collectives" not in m.bottleneck.reason
    f = next(f for f in verdict.findings if f.id == "low-mfu")
    assert not any("collectives" in e for e in f.evidence)
