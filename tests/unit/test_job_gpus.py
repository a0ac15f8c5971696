"""The job's GPUs among the machine's: utilization is judged on the GPUs the job trains on, told
by the CUDA device UUID the probe records, else by NVML's process lists; never the mean of every
GPU in the box (synthetic sessions: NVML rows as the sampler writes them)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from doctor_data.fake_nvml import FakeGpu, install
from rich.console import Console
from synth import DEFAULT_LOADER, loop_spans, process, session

from trainprof.analysis.pipeline import analyze
from trainprof.collect.samplers.gpu import GpuSampler
from trainprof.render import console as console_render
from trainprof.render.json_report import report_dict
from trainprof.store.events import ProcessLog
from trainprof.store.session import Session

UUIDS = [f"GPU-{i:08x}-1111-2222-3333-444455556666" for i in range(8)]
CUDA = {"device": "cuda", "dtype": "bfloat16", "matmul_precision": "high", "capability": [9, 0]}


def gpu_job(pid: int = 1000, uuid: str | None = None, rank: int | None = None) -> ProcessLog:
    """A GPU-bound job's process: 9 ms forward, 0.5 ms idle gap a step on the device's clock."""
    log = process(200, step_s=0.02, loader=dict(DEFAULT_LOADER, pin_memory=True), pid=pid)
    precision: dict[str, Any] = dict(CUDA)
    if uuid is not None:
        precision["gpu_uuid"] = uuid  # torch's form: NVML's without "GPU-"
    log.add_line("X " + json.dumps({"t": 1, "precision": precision}))
    log.add_line("X " + json.dumps({"t": 1, "autocast": "cuda", "dtype": "torch.bfloat16"}))
    for i in range(16, 200, 16):
        t = log.steps["t"][i]
        log.add_line(f"G {t} {i} 9000 8000 2000 500 5000 8000 2000 500 1 2 3")
    if rank is not None:
        log.header.update(role="rank", rank=rank, local_rank=rank, world_size=2)
    return log


def machine(
    utils: dict[int, float], on: dict[int, list[int]] | None = None
) -> list[dict[str, Any]]:
    """NVML rows of an 8-GPU machine: ``utils`` by index (the rest idle), ``on`` the PIDs NVML
    lists on a GPU; the job's tree is PID 1000 and 1001."""
    on = on or {}
    gpus = [
        {
            "index": i,
            "uuid": UUIDS[i],
            "util": utils.get(i, 0.0),
            "procs": {str(pid): 1 << 30 for pid in on.get(i, [])},
        }
        for i in range(8)
    ]
    procs = [{"pid": 1000, "cpu": 100.0, "rss": 1 << 30}, {"pid": 1001, "cpu": 5.0, "rss": 1}]
    return [{"t": 100.0 + i, "procs": procs, "gpu": gpus} for i in range(8)]


def text(s: Session) -> str:
    m, verdict = analyze(s)
    c = Console(record=True, width=100)
    console_render.render(c, s.meta, m, verdict)
    return c.export_text()


def test_a_one_gpu_job_on_an_eight_gpu_machine_is_judged_by_its_own_gpu() -> None:
    # GPU 3 is the job's (97 % busy), GPU 5 a neighbour's job (100 %), the rest idle: the mean
    # of all eight, 25 %, would call this GPU-bound job launch-bound.
    s = session(gpu_job(uuid=UUIDS[3][4:]), sample_rows=machine({3: 97.0, 5: 100.0}))
    m, verdict = analyze(s)
    assert m.gpu_util_mean is not None and abs(m.gpu_util_mean - 97.0) < 0.01
    assert "launch-bound" not in {f.id for f in verdict.findings}
    assert m.bottleneck is not None and m.bottleneck.verdict == "gpu-bound"
    report = report_dict(s.meta, m, verdict)
    assert report["summary"]["gpus"] == {"indices": [3], "of": 8, "by": "uuid"}
    assert "97% mean (GPU 3 of 8)" in text(s)


def test_the_uuid_wins_over_cuda_order_and_nvml_process_lists() -> None:
    # NVML lists the job's PID on GPU 1 (a container's PIDs can match a host's by chance); the
    # probe saw it train on GPU 6.
    s = session(gpu_job(uuid=UUIDS[6][4:]), sample_rows=machine({6: 90.0}, on={1: [1000]}))
    m, _ = analyze(s)
    assert m.gpus is not None and m.gpus.indices == (6,) and m.gpus.by == "uuid"
    assert m.gpu_util_mean is not None and abs(m.gpu_util_mean - 90.0) < 0.01


def test_without_a_uuid_the_gpus_nvml_lists_the_job_on_are_its() -> None:
    # attach has no probe; an older torch has no device UUID: NVML's process lists tell.
    s = session(
        gpu_job(), sample_rows=machine({2: 80.0, 4: 60.0, 7: 100.0}, on={2: [1000], 4: [1001]})
    )
    m, _ = analyze(s)
    assert m.gpus is not None and m.gpus.indices == (2, 4) and m.gpus.by == "pid"
    assert m.gpu_util_mean is not None and abs(m.gpu_util_mean - 70.0) < 0.01


def test_gpus_not_told_apart_are_not_measured_rather_than_averaged() -> None:
    s = session(gpu_job(), sample_rows=machine({3: 97.0}))
    m, verdict = analyze(s)
    assert m.gpu_util_mean is None and m.gpus is None
    assert m.gpu_unavailable is not None and "which of the 8 GPUs" in m.gpu_unavailable
    assert "launch-bound" in {f.id for f in verdict.skipped}
    assert "not measured: which of the 8 GPUs the job uses is unknown" in text(s)


def test_a_single_gpu_machine_needs_no_telling() -> None:
    rows = [{"t": 100.0 + i, "procs": [], "gpu": [{"index": 0, "util": 95.0}]} for i in range(8)]
    s = session(gpu_job(), sample_rows=rows)
    m, _ = analyze(s)
    assert m.gpus is not None and m.gpus.by == "only"
    assert m.gpu_util_mean is not None and abs(m.gpu_util_mean - 95.0) < 0.01
    assert "95% mean" in text(s) and "of 1" not in text(s)


def test_each_rank_reads_its_own_gpu_under_cuda_visible_devices() -> None:
    # CUDA_VISIBLE_DEVICES=4,5: local rank 0 trains on NVML's GPU 4, not GPU 0.
    ranks = [gpu_job(pid=2000 + r, uuid=UUIDS[4 + r][4:], rank=r) for r in (0, 1)]
    s = session(*ranks, sample_rows=machine({0: 0.0, 4: 91.0, 5: 55.0}))
    m, _ = analyze(s)
    by_rank = {v.rank: v.gpu_util for v in m.activity.ranks}
    assert by_rank == {0: 91.0, 1: 55.0}
    assert m.gpus is not None and m.gpus.indices == (4, 5)


def test_the_sampler_rows_carry_each_gpus_uuid_and_processes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """From GpuSampler (pynvml's functions faked: no driver here) to the job's GPU."""
    install(
        monkeypatch,
        [FakeGpu(util=3), FakeGpu(util=88, processes=[(1000, 1 << 30)]), FakeGpu(util=100)],
    )
    sampler = GpuSampler()
    rows = [{"t": 100.0 + i, "procs": [], "gpu": sampler.sample()} for i in range(8)]
    sampler.close()
    gpu = rows[0]["gpu"][1]
    assert gpu["uuid"] == "GPU-00000001-0000-0000-0000-000000000000" and gpu["procs"] == {
        "1000": 1 << 30
    }
    by_pid = session(gpu_job(pid=1000), sample_rows=rows)
    m, _ = analyze(by_pid)
    assert m.gpus is not None and (m.gpus.indices, m.gpus.by) == ((1,), "pid")
    by_uuid = session(gpu_job(pid=7, uuid="00000002-0000-0000-0000-000000000000"), sample_rows=rows)
    m, _ = analyze(by_uuid)
    assert m.gpus is not None and (m.gpus.indices, m.gpus.by) == ((2,), "uuid")
    assert m.gpu_util_mean == 100.0


def test_a_job_training_on_the_cpu_owns_no_gpu_of_the_machine() -> None:
    log = process(200, step_s=0.02)
    log.add_line("X " + json.dumps({"t": 1, "precision": {"device": "cpu", "dtype": "float32"}}))
    rows = [{"t": 100.0 + i, "procs": [], "gpu": [{"index": 0, "util": 0.0}]} for i in range(8)]
    m, verdict = analyze(session(log, sample_rows=rows))
    assert m.gpu_util_mean is None and m.gpus is None
    assert m.gpu_unavailable == "the job trains on the CPU (no GPU of the machine is its)"
    assert "gpu-underutilized" not in {f.id for f in verdict.findings}


def cpu_job(cuda_build: str | None = "12.4", visible: str | None = None) -> ProcessLog:
    log = process(200, step_s=0.02)
    precision = {"device": "cpu", "dtype": "float32", "torch": "2.4.0", "cuda_build": cuda_build}
    precision["cuda_visible_devices"] = visible
    log.add_line("X " + json.dumps({"t": 1, "precision": precision}))
    return log


def test_a_cpu_job_beside_an_idle_gpu_is_told_to_use_it() -> None:
    s = session(cpu_job(), sample_rows=machine({0: 100.0, 1: 2.0}))
    _m, verdict = analyze(s)
    f = next(f for f in verdict.findings if f.id == "gpu-unused")
    # GPU 1 is idle; GPU 0 runs someone else's job and is not offered
    assert "GPU 1 (2% utilized)" in f.evidence[0] and "GPU 0" not in f.evidence[0]
    assert "CUDA 12.4" in " ".join(f.evidence)
    # no stack samples here: the step is not split, and the text does not claim it is
    assert f.evidence[1].startswith(
        "the step (its loop code too: not split by stack samples) takes 100% of the steady"
    )
    assert f.impact is None, "what a GPU would save is not measured"
    assert any("model.to(device)" in fix for fix in f.fix)


def test_a_cpu_only_torch_is_told_to_install_a_cuda_build() -> None:
    one_gpu = [{"t": 100.0 + i, "procs": [], "gpu": [{"index": 0, "util": 0.0}]} for i in range(8)]
    _m, verdict = analyze(session(cpu_job(cuda_build=None), sample_rows=one_gpu))
    f = next(f for f in verdict.findings if f.id == "gpu-unused")
    assert "CPU-only build" in " ".join(f.evidence)
    assert "install a CUDA build of torch" in f.fix[0]


def test_gpus_hidden_on_purpose_or_busy_are_not_unused() -> None:
    hidden = session(cpu_job(visible=""), sample_rows=machine({}))
    busy = session(cpu_job(), sample_rows=machine(dict.fromkeys(range(8), 90.0)))
    on_gpu = session(gpu_job(uuid=UUIDS[0][4:]), sample_rows=machine({0: 95.0}))
    for s in (hidden, busy, on_gpu):
        _m, verdict = analyze(s)
        assert "gpu-unused" not in {f.id for f in verdict.findings}


def test_a_data_parallel_model_is_judged_on_every_gpu_it_runs_on() -> None:
    # nn.DataParallel: one process, parameters on GPU 0, replicas on GPUs 0-3 (NVML lists the
    # process on each); GPU 0, which gathers, is the busiest: it alone would hide idle replicas.
    log = gpu_job(uuid=UUIDS[0][4:])
    log.add_line("X " + json.dumps({"t": 2, "structure": {"model": "DataParallel"}}))
    rows = machine({0: 90.0, 1: 30.0, 2: 30.0, 3: 30.0}, on={i: [1000] for i in range(4)})
    m, _ = analyze(session(log, sample_rows=rows))
    assert m.gpus is not None and m.gpus.indices == (0, 1, 2, 3) and m.gpus.by == "uuid"
    assert m.gpu_util_mean is not None and abs(m.gpu_util_mean - 45.0) < 0.01
    # the same NVML lists without DataParallel: a stray context on other GPUs is not the job's
    plain = session(gpu_job(uuid=UUIDS[0][4:]), sample_rows=rows)
    m, _ = analyze(plain)
    assert m.gpus is not None and m.gpus.indices == (0,)


def test_with_stacks_the_compute_share_leaves_loop_code_out() -> None:
    s = session(cpu_job(), sample_rows=machine({1: 0.0}))
    loop_spans(s, {"model(x)": 0.6, "loss.backward()": 0.2, "metrics.append(x)": 0.2}, 102.5, 105.5)
    _m, verdict = analyze(s)
    f = next(f for f in verdict.findings if f.id == "gpu-unused")
    share = int(f.evidence[1].split("take ")[1].split("%")[0])
    assert f.evidence[1].startswith("forward, backward and the optimizer take"), f.evidence[1]
    assert share < 100, "the loop's own code is not work a GPU would take"
