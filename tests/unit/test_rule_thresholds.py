"""Every rule in the table: fires just above its threshold, stays quiet just below it, and is
skipped with a reason when its signal is missing (never read as zero)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from synth import DEFAULT_LOADER, loop_spans, process, session
from test_device import cuda_memory, gpu_session
from test_mfu import COUNTED, H100, GiB, gpu_job

from trainprof.analysis.pipeline import analyze
from trainprof.analysis.rules import _stalls, all_rules
from trainprof.analysis.rules import fake_batching as fake_batching_rule
from trainprof.analysis.rules import loop_overhead as loop_overhead_rule
from trainprof.store.events import ProcessLog
from trainprof.store.session import Session
from trainprof.store.stacks import StackSpan

CUDA = {"device": "cuda", "dtype": "float32", "matmul_precision": "high", "capability": [8, 0]}
STEADY = (102.5, 100.0 + 2.0 + 99 * 0.1)  # steady window of process(100) with warm-up 5


def ids(sess: Session) -> set[str]:
    return {f.id for f in analyze(sess)[1].findings}


def skipped(sess: Session) -> dict[str, str]:
    return {s.id: s.reason for s in analyze(sess)[1].skipped}


def periodic(n: int, step_s: float, every: int, extra_s: float) -> ProcessLog:
    log = ProcessLog({"pid": 1000, "role": "main", "t0": 100.0, "version": 1})
    t = 0
    for i in range(n):
        dur = int((2.0 if i == 0 else step_s) * 1e6) + (
            int(extra_s * 1e6) if i > 20 and i % every == 0 else 0
        )
        t += dur
        log.add_line(f"S {t} {dur} 0 0 32 1 32")
    log.add_line("L 0 " + json.dumps(DEFAULT_LOADER))
    return log


def cuda(log: ProcessLog, autocast: bool = True) -> ProcessLog:
    log.add_line("X " + json.dumps({"t": 1, "precision": CUDA}))
    if autocast:
        log.add_line("X " + json.dumps({"t": 1, "autocast": "cuda", "dtype": "torch.bfloat16"}))
    return log


def pinned() -> dict[str, object]:
    return dict(DEFAULT_LOADER, pin_memory=True)


# ---- builders: value → session -----------------------------------------------------------


def fake_batching(fetches: float) -> Session:
    return session(
        process(100, batch_size=1, fetches=int(fetches), loader=dict(DEFAULT_LOADER, batch_size=1))
    )


def input_bound(frac: float) -> Session:
    return session(process(100, step_s=0.1, wait_s=0.1 * frac))


def sampler_overhead(frac: float) -> Session:
    return session(process(100, step_s=0.1, wait_s=0.1 * frac, sampler_s=0.1 * frac))


def worker_startup(first_wait: float) -> Session:
    log = process(
        200, step_s=0.02, wait_s=0.001, loader=dict(DEFAULT_LOADER, persistent_workers=False)
    )
    for e in range(8):
        log.add_line(f"E 0 {2_000_000 + e * 500_000} {int(first_wait * 1e6)}")
    return session(log)


def cpu_stall(share: float) -> Session:
    # 300 steps of 20 ms (5.8 s steady), a stall every 30 steps (9 of them)
    return session(periodic(300, 0.02, 30, share * 5.8 / 9))


def blocking_stall(share: float) -> Session:
    """cpu_stall's steps, with stack samples: a sleep in the stalls, the model elsewhere."""
    sess = cpu_stall(share)
    log = sess.processes[0]
    train = "/home/user/proj/train.py"
    spans, end = [], log.t0
    for t_us, d_us in zip(log.steps["t"], log.steps["dur"], strict=True):
        t1 = log.t0 + t_us / 1e6
        slow = d_us > 3 * 20_000 and t_us > 2_000_000
        line = 12 if slow else 11
        frames = (("<module>", train, 1), ("main", train, line))
        if slow:
            frames += (("upload", train, 30),)
            sess.source[(train, 30)] = "time.sleep(delay)"
        else:
            frames += (("Module._call_impl", "/venv/site-packages/torch/nn/modules/module.py", 1),)
        spans.append(StackSpan(end, t1, frames))
        end = t1
    sess.source[(train, 11)] = "loss = model(x)"
    sess.source[(train, 12)] = "upload(metrics)"
    sess.spans = spans
    return sess


def checkpoint_stall(share: float) -> Session:
    log = process(100, step_s=0.1)
    for i in range(20, 100, 20):
        log.add_line(f'C {int(log.steps["t"][i])} {int(share * 9.9 / 4 * 1e6)} 1000 "/ckpt.pt"')
    return session(log)


def eval_stall(share: float) -> Session:
    log = process(100, step_s=0.1)
    for i in range(10, 90, 10):  # 8 evaluations, each between two steps 100 ms apart
        start = int(log.steps["t"][i]) + 1
        log.add_line(f"M {start} 0")
        log.add_line(f"M {start + int(share * 9.4 / 8 * 1e6)} 1")
    return session(log)


def logging_overhead(share: float) -> Session:
    s = session(process(100), output={"stdout_lines": 100, "stdout_bytes": 5000})
    loop_spans(s, {"print(f'loss {loss}')": share, "model(x)": 1 - share}, *STEADY)
    return s


def loop_overhead(share: float) -> Session:
    s = session(process(100))
    loop_spans(s, {"history[step] = summarize(batch, out)": share, "model(x)": 1 - share}, *STEADY)
    return s


def distribution_checks(share: float) -> Session:
    """A policy's action selection: ``share`` of each step inside Categorical's checks."""
    s = session(process(100))
    loop_spans(s, {"action = Categorical(probs).sample()": share, "model(x)": 1 - share}, *STEADY)
    check = (
        ("Distribution.__init__", "/venv/site-packages/torch/distributions/distribution.py", 70),
        ("Simplex.check", "/venv/site-packages/torch/distributions/constraints.py", 500),
    )
    s.spans = [
        StackSpan(x.t0, x.t1, x.frames + check) if x.frames[-1][2] == 10 else x for x in s.spans
    ]
    return s


def loop_overhead_known_call(share: float) -> Session:
    """A line that makes a known costly call (copy.deepcopy) needs a smaller share."""
    s = session(process(100))
    loop_spans(
        s, {"ema_sd = copy.deepcopy(model.state_dict())": share, "model(x)": 1 - share}, *STEADY
    )
    return s


def memory_growth(mb_per_s: float) -> Session:
    rows = [
        {"t": 100.0 + i, "procs": [{"pid": 1000, "rss": (400 + mb_per_s * i) * 2**20, "cpu": 90.0}]}
        for i in range(62)
    ]
    return session(process(600, step_s=0.1), sample_rows=rows)


def cpu_starved(runq: float) -> Session:
    """The main thread waits for a CPU ``runq`` of the time; the job uses its 4 CPUs."""
    rows = [
        {"t": 100.0 + i, "cpu": 100.0, "procs": [{"pid": 1000, "cpu": 400.0, "rq_wait": runq * i}]}
        for i in range(13)
    ]
    log = process(100)
    log.add_line("X " + json.dumps({"t": 1, "precision": {"intra_op_threads": 8}}))
    return session(log, sample_rows=rows, cpu_count=4)


def swap_pressure(mb_per_s: float) -> Session:
    rows = [
        {
            "t": 100.0 + i,
            "procs": [],
            "swap": {"total": 2**31, "used": 2**30, "in_bps": mb_per_s * 2**20, "out_bps": 0},
        }
        for i in range(12)
    ]
    return session(process(100), sample_rows=rows)


def gpu_underutilized(util: float) -> Session:
    rows = [{"t": 100.0 + i, "procs": [], "gpu": [{"index": 0, "util": util}]} for i in range(12)]
    return session(process(100), sample_rows=rows)


def gpu_unused(util: float) -> Session:
    """A job training on the CPU (torch built for CUDA) on a machine whose one GPU is ``util`` %
    busy (another job's, if anyone's)."""
    log = process(100)
    cpu = {"device": "cpu", "dtype": "float32", "torch": "2.4.0+cu124", "cuda_build": "12.4"}
    log.add_line("X " + json.dumps({"t": 1, "precision": cpu}))
    rows = [{"t": 100.0 + i, "procs": [], "gpu": [{"index": 0, "util": util}]} for i in range(12)]
    return session(log, sample_rows=rows)


def no_mixed_precision(major: float) -> Session:
    log = process(100, loader=pinned())
    log.add_line("X " + json.dumps({"t": 1, "precision": dict(CUDA, capability=[int(major), 0])}))
    return session(log)


def pageable_memory(pinned_flag: float) -> Session:
    return session(cuda(process(100, loader=dict(DEFAULT_LOADER, pin_memory=bool(pinned_flag)))))


def host_sync(share: float) -> Session:
    s = session(cuda(process(100, loader=pinned())))
    loop_spans(s, {"total += loss.item()": share, "model(x)": 1 - share}, *STEADY)
    return s


def straggler_rank(extra: float) -> Session:
    ranks = []
    for r in range(3):
        log = process(100, step_s=0.1, wait_s=0.01 + (0.1 * extra if r == 1 else 0.0), pid=1000 + r)
        log.header.update(role="rank", rank=r)
        ranks.append(log)
    return session(*ranks)


def accumulation_allreduce(syncs_per_step: float) -> Session:
    """Two DDP ranks, 4 batches an optimizer step, all-reducing in ``syncs_per_step`` backward
    passes a step (the probe's cumulative counters, every 5 steps)."""
    ranks = []
    for r in range(2):
        log = process(100, step_s=0.1, fetches=4, pid=1000 + r)
        log.header.update(role="rank", rank=r)
        t_us = 2_000_000
        for i in range(1, 100):
            t_us += 100_000
            if i % 5 == 0 or i in (1, 99):
                c = {"s": 0.0, "n": 0, "ddp_s": 0.02 * i, "ddp_n": 4 * i, "backend": "gloo"}
                c["sync_n"] = round(syncs_per_step * i)
                log.add_line("X " + json.dumps({"t": t_us, "collectives": c}))
        ranks.append(log)
    return session(*ranks)


def sampler_set_epoch(unchanged: float) -> Session:
    """3 passes over a loader with a shuffling DistributedSampler, its epoch unchanged (the
    probe's record at each pass) when ``unchanged`` is 1, set each epoch when 0."""
    loader = dict(DEFAULT_LOADER, sampler="torch.utils.data.distributed.DistributedSampler")
    log = process(100, loader=loader)
    for epoch in range(3):
        seen = 0 if unchanged else epoch
        log.add_line("X " + json.dumps({"t": 2_000_000 + epoch, "sampler_epoch": [0, seen]}))
    return session(log)


def compiles_log(graphs: int, each_s: float, at_s: float = 5.0, gap_s: float = 1.0) -> ProcessLog:
    """process(100) (steps 0.1 s apart from 2.1 s) with ``graphs`` compiles of ``each_s``, the
    first ``at_s`` after the process's start, ``gap_s`` apart, as the probe records them."""
    log = process(100)
    for k in range(graphs):
        t0 = int((at_s + k * gap_s) * 1e6)
        rec = {"t0": t0, "t1": t0 + int(each_s * 1e6), "trigger": "DYNAMO", "id": f"0/{k + 1}"}
        rec.update(file="/home/user/proj/train.py", line=40, function="main")
        log.add_line("X " + json.dumps({"t": t0, "compile": rec}))
    return log


def recompiles(share: float) -> Session:
    """Three graphs compiled after warm-up, together ``share`` of the ~9.4 s steady window."""
    return session(compiles_log(3, share * 9.4 / 3))


def graph_breaks(lines: float) -> Session:
    """A compiled model whose graph breaks at ``lines`` lines (the probe's records)."""
    log = compiles_log(1, 0.5, at_s=0.5)
    for k in range(int(lines)):
        rec = {"file": "/home/user/proj/model.py", "line": 30 + k, "function": "forward"}
        log.add_line("X " + json.dumps({"t": 600_000, "graph_break": rec}))
    return session(log)


def switched(switch: str, on: float) -> Session:
    """A debug switch (``anomaly``, ``profiler``) on at the first step, as the probe reads
    it, and off after ``on`` of the ~9.4 s steady window (2.5 s to 11.9 s after the start)."""
    log = process(100)
    for t_s, state in ((2.0, True), (2.5 + on * 9.4, False)):
        rec = {"anomaly": False, "check_nan": True, "profiler": False, "launch_blocking": None}
        rec[switch] = state
        log.add_line("X " + json.dumps({"t": int(t_s * 1e6), "debug": rec}))
    return session(log)


def anomaly(on: float) -> Session:
    return switched("anomaly", on)


def launch_blocking(value: float) -> Session:
    """A CUDA job whose environment had CUDA_LAUNCH_BLOCKING=``value`` at the first step."""
    log = cuda(process(100))
    rec = {"anomaly": False, "check_nan": True, "launch_blocking": str(int(value))}
    log.add_line("X " + json.dumps({"t": 2_000_000, "debug": rec}))
    return session(log)


def unoptimized(count: float) -> Session:
    """The probe's record at the first step: ``count`` parameters (of 6) with a gradient in no
    optimizer."""
    log = process(100)
    facts = {"count": int(count), "elements": 2560 * int(count), "params": 6, "total": 76_000}
    names = ["model.head.weight", "model.head.bias"][: int(count)]
    facts.update(names=names, modules=["model.head"], models=["model"], optimizers=1)
    log.add_line("X " + json.dumps({"t": 2_000_000, "unoptimized": facts}))
    return session(log)


def structure(**facts: object) -> Callable[[float], Session]:
    """A bf16 CUDA job whose structure facts hold ``facts`` when the value is 1, none when 0."""

    def build(on: float) -> Session:
        log = cuda(process(100, loader=pinned()))
        base: dict[str, object] = {"conv2d": 0, "optimizer": {"class": "AdamW"}}
        log.add_line("X " + json.dumps({"t": 2, "structure": {**base, **facts} if on else base}))
        return session(log)

    return build


def zero_grad_kept(on: float) -> Session:
    log = cuda(process(100, loader=pinned()))
    if on:
        log.add_line("X " + json.dumps({"t": 3, "zero_grad_set_to_none": False}))
    return session(log)


def low_mfu(share: float) -> Session:
    """50 it/s on an H100 in bf16 (989.4 TFLOP/s dense): FLOPs a step for this MFU."""
    return gpu_job(dict(COUNTED, per_step=int(share * 989.4e12 / 50)))


def memory_headroom(share: float) -> Session:
    """Peak reserved = this share of the H100's 80 GiB (1 GiB above peak allocated)."""
    return gpu_job(COUNTED, peak_alloc=int(share * 80 * GiB) - GiB)


def no_memory_total() -> Session:
    return gpu_job(COUNTED, precision={k: v for k, v in H100.items() if k != "memory_total"})


def stream(
    workers: float, asked: bool = False, firsts: tuple[int, ...] | None = None, **config: object
) -> Session:
    """An IterableDataset read by ``workers`` DataLoader workers; ``asked``: they called
    get_worker_info() (to split it); ``firsts``: each worker's first-batch checksum (all the
    same by default: the stream duplicated)."""
    loader = {
        **DEFAULT_LOADER,
        "num_workers": int(workers),
        "iterable": True,
        "sampler": "torch.utils.data.dataloader._InfiniteConstantSampler",
        **config,
    }
    logs = [process(100, loader=loader)]
    for i in range(int(workers)):
        w = process(0, loader=None, role="worker", pid=3000 + i)
        w.header["worker_id"] = i
        if asked:
            w.add_line('X {"t": 5, "asked_worker_info": true}')
        crc = 77 if firsts is None else firsts[i]
        w.add_line(f'X {{"t": 6, "first_batch": {crc}}}')
        logs.append(w)
    return session(*logs)


@dataclass(frozen=True)
class Case:
    rule: str
    build: Callable[[float], Session]
    above: float
    below: float
    missing: Callable[[], Session]
    reason: str


NO_STEPS = lambda: session(process(3))  # noqa: E731
CASES = [
    Case(
        "fake-batching",
        fake_batching,
        fake_batching_rule.MIN_FETCHES.value,
        1,
        NO_STEPS,
        "too few steps",
    ),
    Case(
        "input-bound",
        input_bound,
        0.22,
        0.18,
        lambda: session(process(100, loader=None)),
        "no torch DataLoader",
    ),
    Case(
        "iterable-unsplit",
        stream,
        2,
        1,
        lambda: session(process(100, loader=None)),
        "no torch DataLoader",
    ),
    Case(
        "sampler-overhead",
        sampler_overhead,
        0.12,
        0.08,
        lambda: session(process(100, loader=None)),
        "DataLoader",
    ),
    Case("worker-startup", worker_startup, 0.06, 0.02, NO_STEPS, "too few steps"),
    Case(
        "cpu-stall",
        cpu_stall,
        _stalls.SHARE.value * 1.3,
        _stalls.SHARE.value * 0.7,
        NO_STEPS,
        "too few",
    ),
    Case(
        "blocking-stall",
        blocking_stall,
        _stalls.SHARE.value * 1.3,
        _stalls.SHARE.value * 0.7,
        lambda: cpu_stall(0.1),
        "no stack samples",
    ),
    Case("checkpoint-stall", checkpoint_stall, 0.04, 0.02, NO_STEPS, "too few steps"),
    Case("eval-stall", eval_stall, 0.06, 0.04, NO_STEPS, "too few steps"),
    Case(
        "logging-overhead",
        logging_overhead,
        0.07,
        0.03,
        lambda: session(process(100)),
        "no stack samples",
    ),
    Case(
        "loop-overhead", loop_overhead, 0.3, 0.2, lambda: session(process(100)), "no stack samples"
    ),
    Case(
        "loop-overhead",
        loop_overhead_known_call,
        loop_overhead_rule.KNOWN.value * 1.2,
        loop_overhead_rule.KNOWN.value * 0.8,
        lambda: session(process(100)),
        "no stack samples",
    ),
    Case(
        "memory-growth", memory_growth, 1.2, 0.8, lambda: session(process(100)), "no host samples"
    ),
    Case("cpu-starved", cpu_starved, 0.12, 0.08, lambda: session(process(100)), "no host samples"),
    Case(
        "swap-pressure", swap_pressure, 1.2, 0.8, lambda: session(process(100)), "no host samples"
    ),
    Case(
        "gpu-underutilized",
        gpu_underutilized,
        45,
        55,
        lambda: session(process(100)),
        "GPU not measured",
    ),
    Case("no-mixed-precision", no_mixed_precision, 7, 6, lambda: session(process(100)), "CUDA"),
    Case("gpu-unused", gpu_unused, 9, 11, lambda: session(process(100)), "no NVIDIA GPU seen"),
    Case("pageable-memory", pageable_memory, 0, 1, lambda: session(process(100)), "CUDA"),
    Case(
        "host-sync", host_sync, 0.12, 0.08, lambda: session(cuda(process(100))), "no stack samples"
    ),
    Case(
        "launch-bound",
        lambda util: gpu_session(fwd_ms=9.0, gap_ms=0.5, util=util),
        45,
        55,
        lambda: gpu_session(fwd_ms=9.0, gap_ms=0.5),
        "GPU not measured",
    ),
    Case(
        "cuda-memory-growth",
        cuda_memory,
        0.5,
        0.3,
        lambda: session(process(100)),
        "CUDA",
    ),
    Case(
        "misaligned-dims",
        structure(misaligned=[["head", 768, 50257]]),
        1,
        0,
        lambda: session(process(100)),
        "CUDA",
    ),
    Case(
        "conv-bias-before-bn",
        structure(conv_bias_before_bn=["stem.0"], conv2d=4),
        1,
        0,
        lambda: session(process(100)),
        "CUDA",
    ),
    Case(
        "unfused-optimizer",
        structure(optimizer={"class": "AdamW", "foreach": False, "supports_fused": True}),
        1,
        0,
        lambda: session(process(100)),
        "CUDA",
    ),
    Case("zero-grad-not-none", zero_grad_kept, 1, 0, lambda: session(process(100)), "CUDA"),
    Case(
        "cudnn-benchmark-off",
        structure(conv2d=4, cudnn_benchmark=False),
        1,
        0,
        lambda: session(process(100)),
        "CUDA",
    ),
    Case(
        "channels-last",
        structure(conv2d=4, conv2d_channels_last=0),
        1,
        0,
        lambda: session(process(100)),
        "CUDA",
    ),
    Case("low-mfu", low_mfu, 0.29, 0.31, lambda: gpu_job(None), "no FLOP count"),
    Case(
        "batch-memory-headroom",
        memory_headroom,
        0.34,
        0.36,
        no_memory_total,
        "CUDA memory not read",
    ),
    Case(
        "unoptimized-params",
        unoptimized,
        1,
        0,
        lambda: session(process(100)),
        "no model was found at the first optimizer step",
    ),
    Case(
        "recompiles",
        recompiles,
        0.06,
        0.04,
        lambda: session(process(100)),
        "the job did not compile with torch.compile",
    ),
    Case(
        "anomaly-detection",
        anomaly,
        0.55,
        0.45,
        lambda: session(process(100)),
        "debug switches were not read",
    ),
    Case(
        "profiler-left-on",
        lambda on: switched("profiler", on),
        0.55,
        0.45,
        lambda: session(process(100)),
        "debug switches were not read",
    ),
    Case(
        "launch-blocking",
        launch_blocking,
        1,
        0,
        lambda: session(cuda(process(100))),
        "debug switches were not read",
    ),
    Case(
        "graph-breaks",
        graph_breaks,
        1,
        0,
        lambda: session(process(100)),
        "the job did not compile with torch.compile",
    ),
    Case(
        "sampler-set-epoch",
        sampler_set_epoch,
        1,
        0,
        lambda: session(process(100, loader=None)),
        "no torch DataLoader",
    ),
    Case(
        "accumulation-allreduce",
        accumulation_allreduce,
        1.6,
        1.4,
        lambda: session(process(100, fetches=4)),
        "not a multi-rank",
    ),
    Case(
        "straggler-rank",
        straggler_rank,
        0.25,
        0.15,
        lambda: session(process(100)),
        "not a multi-rank",
    ),
    Case(
        "distribution-checks",
        distribution_checks,
        0.06,
        0.04,
        lambda: session(process(100)),
        "no stack samples",
    ),
]


def test_a_stream_its_workers_split_or_may_split_is_left_alone() -> None:
    assert "iterable-unsplit" in ids(stream(4))
    assert "iterable-unsplit" not in ids(stream(4, asked=True))
    assert "iterable-unsplit" not in ids(stream(4, worker_init_fn="train.shard_init"))
    assert "iterable-unsplit" not in ids(stream(4, iterable=False))  # map-style: the sampler
    # a random (or a queued) stream differs from worker to worker: no proof of a duplicate
    assert "iterable-unsplit" not in ids(stream(2, firsts=(11, 12)))
    assert "iterable-unsplit" in ids(stream(3, firsts=(11, 12, 11)))


def test_every_rule_in_the_table_has_a_case() -> None:
    assert {r.id for r in all_rules() if r.check is not None} == {c.rule for c in CASES}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.rule)
def test_fires_above_threshold(case: Case) -> None:
    assert case.rule in ids(case.build(case.above))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.rule)
def test_quiet_just_below_threshold(case: Case) -> None:
    assert case.rule not in ids(case.build(case.below))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.rule)
def test_skipped_with_a_reason_without_its_signal(case: Case) -> None:
    reasons = skipped(case.missing())
    assert case.rule in reasons, f"{case.rule} was not skipped"
    assert case.reason in reasons[case.rule]


def test_loop_overhead_needs_enough_stack_samples_of_it() -> None:
    """30% of the loop (~3 s) in other host work: at 4 Hz that is ~12 stack samples and fires;
    at 2 Hz the same share rests on ~6 (a moment the thread stood still) and stays quiet. Both
    rates still split the step (MIN_SPLIT_SAMPLES of the whole loop)."""
    for rate, fires in ((4, True), (2, False)):
        s = loop_overhead(0.3)
        chunk = {"file": "stacks-0.json", "started_at": 0.0, "rate_hz": rate}
        s.meta["stacks"] = {"chunks": [chunk]}
        m, verdict = analyze(s)
        assert m.ledger is not None and m.ledger.get("loop") > 0  # the step was split
        assert ("loop-overhead" in {f.id for f in verdict.findings}) is fires, rate


def test_thresholds_are_declared_with_their_rule() -> None:
    by_id = {r.id: r for r in all_rules()}
    assert str(by_id["input-bound"].thresholds[0]) == "20%"
    assert str(by_id["sampler-overhead"].thresholds[0]) == "10%"
    assert str(by_id["checkpoint-stall"].thresholds[0]) == "3%"
    assert str(by_id["loop-overhead"].thresholds[0]) == "25%"
    assert by_id["memory-growth"].thresholds[0].value == 2**20


# ---- the stacks column: every rule that judges from stack samples alone (no probe) --------

TRAIN = "/home/user/proj/train.py"
TORCH = "/venv/site-packages/torch"
Frames = tuple[tuple[str, str, int], ...]
STEP: tuple[tuple[float, Frames], ...] = (
    (0.004, (("<module>", TRAIN, 20), ("Module._call_impl", f"{TORCH}/nn/modules/module.py", 1))),
    (0.005, (("<module>", TRAIN, 22), ("backward", f"{TORCH}/autograd/__init__.py", 1))),
    (0.001, (("<module>", TRAIN, 23), ("SGD.step", f"{TORCH}/optim/sgd.py", 1))),
)
SOURCE = {(TRAIN, 80): "time.sleep(delay)"}


def sampled(
    work: tuple[Frames, ...], share: float, every: int = 1, steps: int = 600, **meta: object
) -> Session:
    """``steps`` steps of 10 ms sampled from outside at 100 Hz; after every ``every`` steps,
    ``work`` (its stacks in turn, 10 ms each) for as long as makes ``share`` of the time."""
    n = steps // every
    d = share * steps * 0.01 / (n * (1 - share))
    spans, t = [], 0.0
    for i in range(steps):
        for dur, frames in STEP:
            spans.append(StackSpan(t, t + dur, frames))
            t += dur
        if (i + 1) % every == 0:
            left, k = d, 0
            while left > 1e-9:
                chunk = min(0.01, left)
                spans.append(StackSpan(t, t + chunk, work[k % len(work)]))
                t, left, k = t + chunk, left - chunk, k + 1
    sess = session(attach={"pid": 1000, "rate_hz": 100}, **meta)
    sess.spans = spans
    sess.source.update(SOURCE)
    return sess


def at(line: int, *frames: tuple[str, str, int]) -> Frames:
    return (("<module>", TRAIN, line), *frames)


FORWARD_AT = ("Module._call_impl", f"{TORCH}/nn/modules/module.py", 1)
LAYER_AT = ("Linear.forward", f"{TORCH}/nn/modules/linear.py", 2)
WORK: dict[str, tuple[tuple[Frames, ...], int]] = {
    "input-bound": (
        (
            at(
                18,
                ("_next_data", f"{TORCH}/utils/data/dataloader.py", 1),
                ("D.__getitem__", TRAIN, 60),
            ),
        ),
        1,
    ),
    "sampler-overhead": (
        (
            at(
                18,
                ("_next_index", f"{TORCH}/utils/data/dataloader.py", 1),
                ("S.__iter__", TRAIN, 90),
            ),
        ),
        1,
    ),
    "logging-overhead": ((at(25, ("_str", f"{TORCH}/_tensor_str.py", 1)),), 1),
    "loop-overhead": ((at(27, ("grad_stats", TRAIN, 40)),), 1),
    "anomaly-detection": (
        (at(20, FORWARD_AT, ("format_stack", f"{TORCH}/fx/traceback.py", 200)),),
        1,
    ),
    "cpu-stall": ((at(30, ("search", TRAIN, 70)), at(30, ("search", TRAIN, 71))), 60),
    "blocking-stall": ((at(31, ("upload", TRAIN, 80)),), 60),
    "checkpoint-stall": ((at(40, ("save", f"{TORCH}/serialization.py", 1)),), 60),
    "eval-stall": (
        (
            at(7, ("evaluate", TRAIN, 30), FORWARD_AT),
            at(7, ("evaluate", TRAIN, 30), FORWARD_AT, LAYER_AT),
        ),
        100,
    ),
}


def memory(mib_per_s: float, seconds: int = 12) -> Session:
    rows = [
        {"t": float(i), "procs": [{"pid": 1000, "rss": (300 + mib_per_s * i) * 2**20}]}
        for i in range(seconds + 1)
    ]
    return sampled(WORK["loop-overhead"][0], 0.01, steps=100 * seconds, sample_rows=rows)


def waits_for_a_cpu(runq: float) -> Session:
    rows = [
        {"t": float(i), "cpu": 100.0, "procs": [{"pid": 1000, "cpu": 400.0, "rq_wait": runq * i}]}
        for i in range(7)
    ]
    return sampled(WORK["loop-overhead"][0], 0.01, sample_rows=rows, cpu_count=4)


@dataclass(frozen=True)
class StackCase:
    rule: str
    build: Callable[[float], Session]
    above: float
    below: float
    reason: str  # why it is skipped with a quarter of a second of stacks, or no host samples


def work(rule: str) -> Callable[[float], Session]:
    frames, every = WORK[rule]
    return lambda share: sampled(frames, share, every)


TOO_LITTLE = "too little was sampled"
STACK_CASES = [
    StackCase("input-bound", work("input-bound"), 0.25, 0.15, TOO_LITTLE),
    StackCase("sampler-overhead", work("sampler-overhead"), 0.13, 0.07, TOO_LITTLE),
    StackCase("logging-overhead", work("logging-overhead"), 0.07, 0.03, TOO_LITTLE),
    StackCase("loop-overhead", work("loop-overhead"), 0.3, 0.2, TOO_LITTLE),
    StackCase("anomaly-detection", work("anomaly-detection"), 0.03, 0.01, TOO_LITTLE),
    StackCase("cpu-stall", work("cpu-stall"), 0.065, 0.035, TOO_LITTLE),
    StackCase("blocking-stall", work("blocking-stall"), 0.065, 0.035, TOO_LITTLE),
    StackCase("checkpoint-stall", work("checkpoint-stall"), 0.04, 0.02, TOO_LITTLE),
    StackCase("eval-stall", work("eval-stall"), 0.08, 0.04, TOO_LITTLE),
    StackCase("memory-growth", memory, 6.0, 0.5, "no host samples"),
    StackCase("cpu-starved", waits_for_a_cpu, 0.12, 0.08, "no host samples"),
]


def test_every_rule_that_judges_from_stacks_has_a_stacks_case() -> None:
    assert {r.id for r in all_rules() if r.or_from} == {c.rule for c in STACK_CASES}


@pytest.mark.parametrize("case", STACK_CASES, ids=lambda c: c.rule)
def test_from_stacks_fires_above_threshold(case: StackCase) -> None:
    found = analyze(case.build(case.above))[1].findings
    assert case.rule in {f.id for f in found if f.severity != "info"}


@pytest.mark.parametrize("case", STACK_CASES, ids=lambda c: c.rule)
def test_from_stacks_quiet_just_below_threshold(case: StackCase) -> None:
    assert case.rule not in ids(case.build(case.below))


@pytest.mark.parametrize("case", STACK_CASES, ids=lambda c: c.rule)
def test_from_stacks_skipped_with_a_reason_without_its_signal(case: StackCase) -> None:
    sess = case.build(case.above)
    sess.spans = [sp for sp in sess.spans if sp.t1 <= 0.25]
    sess.samples = session(attach={"pid": 1000}).samples
    reasons = skipped(sess)
    assert case.rule in reasons, f"{case.rule} was not skipped"
    assert case.reason in reasons[case.rule]
