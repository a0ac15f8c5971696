"""Analysis on synthetic sessions: metrics, steady state, the first rules, unavailable ≠ 0."""

from __future__ import annotations

import json

import pytest
from conftest import assert_rules_ran
from synth import DEFAULT_LOADER, process, session

from trainprof.analysis.pipeline import analyze
from trainprof.render.json_report import report_dict
from trainprof.render.quiet_note import quiet_note
from trainprof.store.session import Session


def test_steady_state_excludes_warmup_and_says_so() -> None:
    m, _ = analyze(session(process(100, step_s=0.05, first_step_s=3.0)))
    assert m.total_steps == 100
    assert m.warmup_steps == 5
    assert m.steady is not None
    assert m.steady.count == 95
    assert m.steady.steps_per_s == pytest.approx(20.0, rel=1e-3)
    assert m.steady.samples_per_s == pytest.approx(640.0, rel=1e-3)
    assert m.steady.max_s == pytest.approx(0.05)
    assert m.time_to_first_step_s == pytest.approx(100.0 + 3.0 - 99.0)


def test_too_few_steps_skips_rules_instead_of_guessing() -> None:
    m, verdict = analyze(session(process(4)))
    assert m.steady is None
    assert verdict.findings == ()
    assert {s.id for s in verdict.skipped} >= {"fake-batching", "input-bound"}


def test_healthy_session_has_no_findings() -> None:
    _, verdict = analyze(session(process(200, step_s=0.1, wait_s=0.005)))
    assert verdict.findings == ()
    assert_rules_ran(verdict)


def test_input_bound_fires_with_evidence_and_fix() -> None:
    loader = dict(DEFAULT_LOADER, num_workers=0, persistent_workers=False)
    _, verdict = analyze(session(process(200, step_s=0.1, wait_s=0.06, loader=loader)))
    (f,) = verdict.findings
    assert f.id == "input-bound"
    assert f.impact == pytest.approx(0.6, abs=0.01)
    assert "60%" in f.evidence[0]
    assert any("num_workers=3" in fx for fx in f.fix)  # 4 usable CPUs → 3 workers


def test_input_bound_on_an_iterable_dataset_names_its_iter_and_warns_of_unsharded_workers() -> None:
    """An IterableDataset makes its samples in __iter__ (it said "__getitem__", and pointed at
    torch's base class), and workers each run the whole stream unless it is split: the
    num_workers fix alone would have trained on every sample num_workers times."""
    loader = dict(
        DEFAULT_LOADER,
        num_workers=0,
        persistent_workers=False,
        sampler="torch.utils.data.dataloader._InfiniteConstantSampler",
        iterable=True,
        getitem_at=["/home/user/proj/stream.py", 9, "Stream.__iter__"],
    )
    log = process(200, step_s=0.1, wait_s=0.06, loader=loader)
    log.add_line("F 1 200 12000000 0 0")  # 60 ms a batch in the main process
    m, verdict = analyze(session(log))
    f = next(f for f in verdict.findings if f.id == "input-bound")
    assert f.where == "/home/user/proj/stream.py:9 (Stream.__iter__)", f.where
    assert any("a batch takes 60.0 ms: __iter__ 60.0 ms" in e for e in f.evidence), f.evidence
    assert any(
        "get_worker_info()" in fx and "each worker yields every sample" in fx for fx in f.fix
    )
    assert any(fx.startswith("make __iter__ cheaper") for fx in f.fix) and m.streams_data
    plain = analyze(
        session(process(200, step_s=0.1, wait_s=0.06, loader=dict(loader, iterable=False)))
    )
    assert not any("get_worker_info" in fx for fx in plain[1].findings[0].fix)


def test_input_bound_threshold_is_not_crossed_at_15_percent() -> None:
    _, verdict = analyze(session(process(200, step_s=0.1, wait_s=0.015)))
    assert [f.id for f in verdict.findings] == []
    assert_rules_ran(verdict)


def test_fake_batching_fires_on_batch_of_one_and_many_fetches() -> None:
    loader = dict(DEFAULT_LOADER, batch_size=1)
    _, verdict = analyze(
        session(process(100, step_s=0.2, wait_s=0.01, batch_size=1, fetches=16, loader=loader))
    )
    (f,) = verdict.findings
    assert f.id == "fake-batching"
    assert "16 DataLoader fetches per optimizer step" in f.evidence[0]
    # Batching saves all but one of the 16 per-sample passes through the step.
    assert f.impact is not None and 0.8 < f.impact <= 1 - 1 / 16
    assert any("batch_size=16" in fx for fx in f.fix)


def test_a_batch_sampler_of_ones_is_named_as_what_makes_the_batches() -> None:
    """A framework's loader (accelerate's, under the Hugging Face Trainer) passes a
    batch_sampler: its batch_size is None, which the evidence printed as such."""
    loader = dict(DEFAULT_LOADER, batch_size=None)
    _, verdict = analyze(session(process(100, step_s=0.2, batch_size=1, fetches=16, loader=loader)))
    (f,) = verdict.findings
    assert f.id == "fake-batching"
    assert f.evidence[0].endswith("each a batch of 1 (from its batch_sampler, BatchSampler)")


def test_real_batches_with_gradient_accumulation_are_not_fake_batching() -> None:
    _, verdict = analyze(session(process(100, batch_size=32, fetches=4)))
    assert verdict.findings == ()
    assert_rules_ran(verdict)


def test_gpu_unavailable_is_none_not_zero() -> None:
    rows = [
        {
            "t": 100.0 + i,
            "procs": [{"pid": 1000, "cpu": 50.0, "rss": 10_000}],
            "gpu": {"unavailable": "no NVIDIA driver"},
        }
        for i in range(5)
    ]
    m, verdict = analyze(session(process(50), sample_rows=rows))
    assert m.gpu_util_mean is None
    assert m.gpu_unavailable == "no NVIDIA driver"
    data = report_dict({"command": []}, m, verdict)
    assert data["summary"]["gpu_util_mean"] is None
    assert data["summary"]["cpu_percent_mean"] == 50.0


def test_gpu_utilization_not_supported_is_unavailable_not_zero() -> None:
    rows = [
        {
            "t": 100.0 + i,
            "procs": [],
            "gpu": [{"index": 0, "util": None, "util_unavailable": "not supported (MIG?)"}],
        }
        for i in range(5)
    ]
    m, _ = analyze(session(process(50), sample_rows=rows))
    assert m.gpu_util_mean is None
    assert m.gpu_unavailable == "not supported (MIG?)"


def test_gpu_utilization_zero_is_a_real_zero() -> None:
    rows = [{"t": 100.0 + i, "procs": [], "gpu": [{"index": 0, "util": 0}]} for i in range(5)]
    m, _ = analyze(session(process(50), sample_rows=rows))
    assert m.gpu_util_mean == 0.0


def test_cpu_first_reading_is_unknown_not_zero() -> None:
    rows = [{"t": 100.0, "procs": [{"pid": 1000, "cpu": None, "rss": 1}]}]
    m, _ = analyze(session(process(50), sample_rows=rows))
    assert m.cpu_percent_mean is None


def test_report_contract_shape() -> None:
    m, verdict = analyze(session(process(60)))
    data = report_dict(
        {"command": ["python", "t.py"], "exit_code": 0, "wall_s": 3.0, "run_dir": "/x"}, m, verdict
    )
    assert data["schema"] == "trainprof.report/1"
    assert set(data) == {
        "schema",
        "trainprof_version",
        "run",
        "summary",
        "ledger",
        "device",
        "ranks",
        "findings",
        "skipped",
    }
    assert {"command", "exit_code", "signal", "wall_s", "run_dir"} <= set(data["run"])
    assert {
        "steps",
        "steps_per_s",
        "samples_per_s",
        "step_time_s",
        "data_wait_frac",
        "gpu_util_mean",
        "cpu_percent_mean",
        "peak_rss_bytes",
    } <= set(data["summary"])
    assert set(data["summary"]["step_time_s"]) == {"p50", "p95", "max"}


def test_primary_process_is_the_one_with_steps() -> None:
    launcher = process(0, pid=10, loader=None)
    rank0 = process(80, pid=11)
    s = session(launcher, rank0)
    assert s.primary is rank0


def test_a_steady_state_of_28_ms_is_not_judged() -> None:
    """11 steps of 2.5 ms: too short to say anything about input or stalls."""
    m, verdict = analyze(session(process(12, step_s=0.0025, wait_s=0.002)))
    assert m.steady is not None and m.steady.data_wait_frac == pytest.approx(0.8)  # described...
    assert verdict.findings == ()  # ...but not judged
    assert any("too short to judge" in s.reason for s in verdict.skipped)
    note, all_clear = quiet_note({"exit_code": 0}, m)
    # the panel shows 80 % waiting, so the note names it instead of saying "no problem"
    assert not all_clear and note.endswith("more steps would have them judge it")
    assert '"DataLoader: waiting on workers, or its own code" takes 80%' in note
    assert "over only 11 steady steps in" in note and "too short" not in note
    assert "no problem" not in note.lower()
    note, _ = quiet_note({"exit_code": 0, "stopped_by": "steps"}, m)
    assert note.endswith("a larger --steps would have them judge it")


def test_workers_that_could_keep_up_but_share_the_cpus_are_not_contradicted() -> None:
    """2 workers at 50 ms a batch could deliver 40/s; the loop asks for 6.7/s and still waits:
    on 2 CPUs the main process takes the cores, and the evidence says so."""
    main = process(100, step_s=0.15, wait_s=0.06)
    workers = []
    for i in range(2):
        w = process(0, loader=None, role="worker", pid=2000 + i)
        w.add_line("F 1 100 5000000 1000000 0")
        workers.append(w)
    m, verdict = analyze(session(main, *workers, usable_cpus=2))
    f = next(f for f in verdict.findings if f.id == "input-bound")
    text = " ".join(f.evidence + f.fix)
    assert "could deliver 40.0 batches/s" in text and "share 2 usable CPUs" in text
    assert "deliver at most" not in text


def _steps_with_evaluations(eval_us: int, wait_us: int) -> Session:
    """200 steps of 100 ms waiting ``wait_us`` for data; every 20th holds an evaluation of
    ``eval_us`` whose own batches waited 0.4 s of it."""
    from trainprof.store.events import ProcessLog

    log = ProcessLog({"pid": 1000, "role": "main", "t0": 100.0, "version": 1})
    t = 0
    for i in range(200):
        evaluates = i % 20 == 10
        dur = 2_000_000 if i == 0 else 100_000 + (eval_us if evaluates else 0)
        t += dur
        if evaluates:  # model.eval() after the previous step, model.train() before this one
            log.add_line(f"M {t - dur + 1000} 0")
            log.add_line(f"M {t - 100_000} 1")
        log.add_line(f"S {t} {dur} {wait_us + (400_000 if evaluates else 0)} 0 32 1 32")
    log.add_line("L 0 " + json.dumps(DEFAULT_LOADER))
    log.torch_imported_us = 1000
    return session(log)


def test_the_data_wait_shown_is_the_training_steps_where_evaluations_ran() -> None:
    """Steps of 100 ms waiting 20 ms for data; every 20th holds a 500 ms evaluation that waits
    400 ms for its own batches. The summary said the steps' wait with the evaluations' in it
    (a Lightning job: "89% of step time" beside a ledger whose data was 19%)."""
    from rich.console import Console

    from trainprof.analysis.from_steps import compute
    from trainprof.render.console import summary_table

    sess = _steps_with_evaluations(eval_us=500_000, wait_us=20_000)
    m = compute(sess)
    assert m.activity.train_wait_frac == pytest.approx(0.2, abs=0.01)
    console = Console(width=300, record=True, color_system=None)
    console.print(summary_table({}, m))
    text = " ".join(console.export_text().split())
    assert "data wait 20% of step time in steps outside evaluations" in text, text
    summary = report_dict({"command": []}, m, analyze(sess)[1])["summary"]
    assert summary["data_wait_frac_outside_evals"] == pytest.approx(0.2, abs=0.01)
    assert summary["data_wait_frac"] > 0.3  # the evaluations' batches counted in


def test_training_steps_that_wait_are_input_bound_though_evaluations_take_the_run() -> None:
    """The steps between evaluations wait 40% of their time; the evaluations take ~60% of the
    run, so data is under 20% of it. A Lightning job like this (86% and 19%) was told only of
    its evaluations."""
    m, verdict = analyze(_steps_with_evaluations(eval_us=3_000_000, wait_us=40_000))
    assert m.ledger is not None and m.ledger.share("data_wait") < 0.2
    ids = [f.id for f in verdict.findings]
    assert ids[:2] == ["eval-stall", "input-bound"], ids
    f = verdict.findings[1]
    assert f.title == (
        "Input-bound: training steps wait for data 40% of their time (outside evaluations)"
    ), f.title
    # steps that barely wait stay quiet, whatever the evaluations cost
    _m, quiet = analyze(_steps_with_evaluations(eval_us=3_000_000, wait_us=10_000))
    assert "input-bound" not in [f.id for f in quiet.findings]


def test_an_evaluation_s_batches_are_not_training_samples() -> None:
    """Steps of 32 samples; every 20th holds an evaluation whose loader's 20 batches of 32 the
    probe counted into that step: samples/s is still 32 a step (was 2.5x higher with evals
    every few steps in a Trainer run)."""
    from trainprof.analysis.from_steps import compute
    from trainprof.store.events import ProcessLog

    log = ProcessLog({"pid": 1000, "role": "main", "t0": 100.0, "version": 1})
    t = 0
    for i in range(200):
        evaluates = i % 20 == 10
        dur = 2_000_000 if i == 0 else 100_000 + (500_000 if evaluates else 0)
        t += dur
        if evaluates:  # model.eval() after the previous step, model.train() before this one
            log.add_line(f"M {t - dur + 1000} 0")
            log.add_line(f"M {t - 100_000} 1")
        samples = 32 + (20 * 32 if evaluates else 0)
        log.add_line(f"S {t} {dur} 0 0 32 {1 + (20 if evaluates else 0)} {samples}")
    log.add_line("L 0 " + json.dumps(DEFAULT_LOADER))
    log.torch_imported_us = 1000
    m = compute(session(log))
    assert m.activity.evals and m.steady is not None
    assert m.steady.samples_per_step == pytest.approx(32)
    assert m.steady.samples_per_s == pytest.approx(32 * m.steady.steps_per_s)
