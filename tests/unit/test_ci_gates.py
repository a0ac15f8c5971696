"""The gates of `trainprof ci` on report dicts: each gate passes, fails, or says why it cannot
judge; the exit code follows (0 pass, 1 a gate, 3 the job); throughput windows tile the steady
span."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from trainprof.compare.windows import Window, windows_of
from trainprof.gate.gates import GateOptions, evaluate, parse_size


def report(**summary: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "schema": "trainprof.report/1",
        "run": {"command": ["python", "train.py"], "exit_code": 0, "stopped_by": "steps",
                "wall_s": 6.0, "signal": None, "exception": None},
        "summary": {"steps": 50, "steps_per_s": 40.0, "samples_per_s": 1280.0,
                    "step_time_s": {"p50": 0.024, "p95": 0.030, "max": 0.05},
                    "data_wait_frac": 0.05, "gpu_util_mean": None, "peak_rss_bytes": 400 << 20,
                    "warmup_steps_excluded": 3},
        "settings": {"batch_size": 32, "samples_per_step": 32.0, "num_workers": 0,
                     "world_size": 1, "device": "cpu", "precision": "float32",
                     "torch_version": "2.13.0+cpu", "usable_cpus": 2},
        "findings": [],
        "skipped": [{"id": "gpu-underutilized",
                     "reason": "GPU not measured: no NVIDIA driver (NVML not found)"}],
    }  # fmt: skip
    base["summary"].update(summary)
    return base


def finding(fid: str, severity: str, where: str | None = None) -> dict[str, Any]:
    return {"id": fid, "severity": severity, "title": f"{fid} title", "where": where,
            "evidence": ["e"], "fix": ["f"], "impact": None}  # fmt: skip


def gate(r: dict[str, Any], name: str, **opts: Any) -> Any:
    v = evaluate(r, [], GateOptions(**opts))
    return next(g for g in v.gates if g.name == name), v.exit_code


def test_a_clean_run_passes_and_exits_0() -> None:
    v = evaluate(report(), [], GateOptions())
    assert [g.name for g in v.gates] == ["job", "findings"]
    assert all(g.passed for g in v.gates) and v.exit_code == 0


@pytest.mark.parametrize(
    ("run", "measured"),
    [
        ({"exit_code": 124, "stopped_by": "hang"}, "hung"),
        ({"exit_code": 124, "stopped_by": "timeout"}, "timed out"),
        (
            {
                "exit_code": 1,
                "stopped_by": None,
                "exception": {"type": "RuntimeError", "message": "stack expects"},
            },
            "exit 1",
        ),  # fmt: skip
        ({"exit_code": 137, "stopped_by": None, "signal": "SIGKILL"}, "exit 137"),
    ],
)
def test_a_crash_or_hang_exits_3(run: dict[str, Any], measured: str) -> None:
    r = report()
    r["run"].update(run)
    g, code = gate(r, "job")
    assert g.status == "fail" and g.measured == measured and code == 3


def test_a_kill_as_python_shut_down_still_fails_and_says_when() -> None:
    r = report()
    r["run"].update(exit_code=134, stopped_by=None, signal="SIGABRT", killed_at_shutdown=True)
    g, code = gate(r, "job")
    assert g.status == "fail" and code == 3
    assert "(killed by SIGABRT as Python shut down, after the script ended)" in g.message


def test_a_job_without_steps_fails_the_job_gate_with_exit_1() -> None:
    r = report(steps=0, steps_per_s=None, samples_per_s=None, step_time_s=None)
    r["run"]["stopped_by"] = None
    g, code = gate(r, "job")
    assert g.status == "fail" and "nothing to measure" in g.message and code == 1


def test_a_job_the_probe_did_not_load_in_fails_and_says_why_not_no_steps() -> None:
    r = report(steps=None, steps_per_s=None, samples_per_s=None, step_time_s=None)
    r["run"].update(stopped_by=None, probe={"loaded": False, "reason": "python -I ignores ..."})
    g, code = gate(r, "job")
    assert g.status == "fail" and g.measured == "no probe" and code == 1
    assert "the probe did not load in it (python -I ignores ...)" in g.message


def test_the_bootstrap_writes_the_failure_file_the_runner_reads() -> None:
    """The bootstrap can import nothing of trainprof (the import may be what failed), so it
    spells the file's name itself."""
    from trainprof.collect.launcher import BOOTSTRAP_DIR
    from trainprof.store.schema import PROBE_FAILED

    source = (BOOTSTRAP_DIR / "sitecustomize.py").read_text()
    assert f'"{PROBE_FAILED}"' in source


def test_findings_at_or_above_fail_on_fail_unless_allowed() -> None:
    r = report()
    r["findings"] = [finding("input-bound", "warning", "train.py:12 (main)")]
    g, code = gate(r, "findings")
    assert g.passed and code == 0  # a warning, --fail-on error
    g, code = gate(r, "findings", fail_on="warning")
    assert g.status == "fail" and code == 1 and "input-bound" in g.message
    assert g.findings[0]["where"] == "train.py:12 (main)"
    g, code = gate(r, "findings", fail_on="warning", allow=("input-bound",))
    assert g.passed and code == 0 and g.details[0].startswith("allowed (--allow)")


@pytest.mark.parametrize(
    ("opt", "value", "name", "ok"),
    [
        ("max_data_wait", 0.2, "max-data-wait", True),
        ("max_data_wait", 0.01, "max-data-wait", False),
        ("max_step_p95_s", 0.05, "max-step-p95", True),
        ("max_step_p95_s", 0.02, "max-step-p95", False),
        ("max_peak_rss", 8 * 10**9, "max-peak-rss", True),
        ("max_peak_rss", 100 << 20, "max-peak-rss", False),
        ("min_samples_per_s", 1000.0, "min-samples-per-s", True),
        ("min_samples_per_s", 2000.0, "min-samples-per-s", False),
    ],
)
def test_thresholds_pass_and_fail(opt: str, value: float, name: str, ok: bool) -> None:
    g, code = gate(report(), name, **{opt: value})
    assert g.passed is ok and code == (0 if ok else 1), g


def test_a_gate_that_cannot_measure_fails_and_says_why() -> None:
    g, code = gate(report(), "min-gpu-util", min_gpu_util=50.0)
    assert g.status == "not measured" and "no NVIDIA driver" in g.message and code == 1
    g, code = gate(report(data_wait_frac=None), "max-data-wait", max_data_wait=0.2)
    assert g.status == "not measured" and "no DataLoader" in g.message and code == 1


def with_windows(r: dict[str, Any], rates: list[float]) -> dict[str, Any]:
    r = copy.deepcopy(r)
    r["ci"] = {"windows": [Window(20, 0.5, x, 40.0, 0.024).to_json() for x in rates]}
    return r


def test_baseline_compares_medians_within_the_tolerance() -> None:
    base = with_windows(report(), [1000.0, 1300.0, 1250.0])  # median 1250
    cur = [Window(20, 0.5, x, 40.0, 0.024, other_cpus=1.5) for x in (1150.0, 1100.0, 2000.0)]
    v = evaluate(report(), cur, GateOptions(baseline=base, tolerance=0.10, repeat=3))
    g = v.gates[-1]
    assert g.name == "baseline" and g.passed, g.message  # 1150 vs 1250: -8%
    v = evaluate(report(), cur, GateOptions(baseline=base, tolerance=0.05, repeat=3))
    g = v.gates[-1]
    assert g.status == "fail" and v.exit_code == 1
    assert "median of 3 windows, 1100.0–2000.0" in g.message  # the spread it saw
    assert "more than the 5% tolerance" in g.message
    assert "kept 1.5 CPUs of this machine busy" in g.message
    assert len(g.details) == 3


def test_baseline_without_windows_uses_its_steady_samples_per_s() -> None:
    v = evaluate(report(samples_per_s=1000.0), [], GateOptions(baseline=report(), tolerance=0.1))
    assert v.gates[-1].status == "fail" and "-21.9%" in v.gates[-1].message


def test_baseline_of_a_loop_without_batch_size_compares_its_it_s() -> None:
    """A hand-written loop (no DataLoader, so no samples/s in either run): its backward passes
    a second are compared instead (it was "not measured", and the gate failed every build);
    a different kind of step is not compared."""

    def loop(rate: float, unit: str = "backward pass") -> dict[str, Any]:
        r = report(samples_per_s=None, steps_per_s=rate, unit=unit)
        r["settings"]["batch_size"] = None
        return r

    ok = evaluate(loop(300.0), [], GateOptions(baseline=loop(310.0))).gates[-1]
    assert ok.passed and ok.limit == "it/s >= baseline - 10%", ok.message
    assert ok.message.startswith("it/s 300.0 (1 window: no spread measured) vs the baseline's")
    slow = evaluate(loop(250.0), [], GateOptions(baseline=loop(310.0))).gates[-1]
    assert slow.status == "fail" and "-19.4%" in slow.message
    other = evaluate(loop(300.0), [], GateOptions(baseline=loop(310.0, "batch"))).gates[-1]
    assert other.status == "not measured", other.message
    assert (
        "their steps differ in kind (the baseline counts batches, this run backward passes)"
        in other.message
    )
    # measured in windows (--repeat): the medians of both runs' windows
    base = loop(310.0)
    base["ci"] = {"windows": [Window(20, 0.07, None, x, 0.003).to_json() for x in (305, 320, 330)]}
    now = [Window(20, 0.07, None, x, 0.003) for x in (250.0, 300.0, 310.0)]
    g = evaluate(loop(280.0), now, GateOptions(baseline=base, repeat=3)).gates[-1]
    assert g.passed and "it/s 300.0 (median of 3 windows, 250.0–310.0" in g.message, g.message
    assert "vs the baseline's 320.0 (median of 3 windows" in g.message
    assert g.details[0] == "window 1: 20 steps in 0.07 s, 250.0 it/s"


@pytest.mark.parametrize(
    ("key", "value", "label"),
    [
        ("batch_size", 64, "batch size 32 → 64"),
        ("world_size", 2, "world size 1 → 2"),
        ("device", "cuda (NVIDIA H100)", "device cpu → cuda (NVIDIA H100)"),
        ("precision", "float32 + autocast cuda:bfloat16", "precision float32 → float32 + "),
    ],
)
def test_baseline_refuses_to_compare_unlike_runs(key: str, value: Any, label: str) -> None:
    cur = report(samples_per_s=5000.0)  # faster: it would pass, and must not pass silently
    cur["settings"][key] = value
    v = evaluate(cur, [], GateOptions(baseline=report()))
    g = v.gates[-1]
    assert g.status == "not comparable" and label in g.message and v.exit_code == 1


def test_a_changed_worker_count_is_still_compared() -> None:
    cur = report()
    cur["settings"]["num_workers"] = 4
    assert evaluate(cur, [], GateOptions(baseline=report())).gates[-1].passed


def test_a_baseline_without_settings_is_not_comparable() -> None:
    old = report()
    del old["settings"]
    g = evaluate(report(), [], GateOptions(baseline=old)).gates[-1]
    assert g.status == "not comparable" and "records no settings" in g.message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("8GB", 8 * 10**9),
        ("8GiB", 8 << 30),
        ("512M", 512 * 10**6),
        ("1.5g", 1_500_000_000),
        ("1000", 1000),
        ("512MiB", 512 << 20),
        ("8XB", None),
        ("GB", None),
        ("-1G", None),
        ("8i", None),
    ],
)
def test_parse_size(text: str, expected: int | None) -> None:
    assert parse_size(text) == expected


def test_windows_tile_the_steady_span_and_add_up() -> None:
    # 3 warm-up steps, then 30 steady steps of 10 ms with 32 samples each.
    t = [100_000 * (i + 1) for i in range(3)] + [300_000 + 10_000 * (i + 1) for i in range(30)]
    dur = [100_000] * 3 + [10_000] * 30
    samples = [32] * 33
    ws = windows_of(t, dur, samples, warmup=3, k=3)
    assert [w.steps for w in ws] == [10, 10, 10]
    assert sum(w.seconds for w in ws) == pytest.approx(0.3)
    assert all(w.samples_per_s == pytest.approx(3200.0) for w in ws)
    assert windows_of(t, dur, samples, warmup=3, k=10) == windows_of(t, dur, samples, 3, 6)
    assert len(windows_of(t, dur, samples, warmup=3, k=10)) == 6  # at least 5 steps a window
    assert windows_of(t[:6], dur[:6], samples[:6], warmup=3, k=3) == []  # no steady state


def test_no_finding_from_a_run_too_short_to_judge_is_not_a_pass() -> None:
    r = report(steps_per_s=100.0)
    r["skipped"].append(
        {"id": "input-bound",
         "reason": "the steady state is too short to judge (28 steps in 280 ms; rules need 1 s)"}
    )  # fmt: skip
    g, code = gate(r, "findings")
    assert g.status == "not measured" and code == 1
    assert "28 steps in 280 ms" in g.message and "about 153 steps here" in g.message
    r["run"].update(exit_code=1, stopped_by=None)  # a crash: the job gate's news
    g, code = gate(r, "findings")
    assert g.status == "pass" and code == 3


def waiting(rates: list[float], wait_share: float) -> list[Window]:
    """Windows of 0.5 s whose main thread waited ``wait_share`` of it for a CPU."""
    return [Window(20, 0.5, x, 40.0, 0.024, cpu_wait_s=0.5 * wait_share) for x in rates]


def with_stored(r: dict[str, Any], windows: list[Window]) -> dict[str, Any]:
    r = copy.deepcopy(r)
    r["ci"] = {"windows": [w.to_json() for w in windows]}
    return r


def test_a_drop_that_cpu_contention_explains_passes_and_says_so() -> None:
    base = with_stored(report(), waiting([1250.0] * 3, 0.0))
    # 30 % slower on the wall clock, but the main thread waited 30 % of the time for a CPU:
    # without the wait, 1250 × 0.7 / 0.7 = 1250 samples/s, as fast as the baseline.
    cur = waiting([875.0] * 3, 0.30)
    g = evaluate(report(), cur, GateOptions(baseline=base, tolerance=0.10, repeat=3)).gates[-1]
    assert g.passed and "Passed for CPU contention" in g.message, g.message
    assert "waited for a CPU 30% of the time" in g.message and "+0.0%" in g.message


def test_a_regression_under_contention_still_fails() -> None:
    base = with_stored(report(), waiting([1250.0] * 3, 0.0))
    # 50 % slower while waiting 20 %: without the wait still 1250 × 0.5 / 0.8 = 781 (−37 %).
    cur = waiting([625.0] * 3, 0.20)
    g = evaluate(report(), cur, GateOptions(baseline=base, tolerance=0.10, repeat=3)).gates[-1]
    assert g.status == "fail" and "Not the runner's load alone" in g.message, g.message
    assert "waited for a CPU 20% of the time" in g.message and "-37.5%" in g.message
    # A small wait excuses nothing, even when it would close the gap.
    cur = waiting([1100.0] * 3, 0.04)
    g = evaluate(report(), cur, GateOptions(baseline=base, tolerance=0.10, repeat=3)).gates[-1]
    assert g.status == "fail"


def test_windows_read_the_main_threads_cpu_wait_from_the_host_samples(tmp_path: Any) -> None:
    import json

    from trainprof.compare.windows import with_runner_load

    # Samples every 0.5 s from t=10: the main thread (pid 7) waits 0.1 s per second; another
    # process's counter is ignored. Windows [10.25, 10.75] and [10.75, 11.75] (the last ends
    # after the last sample, at 11.5: its wait there is undercounted, never invented).
    rows = [
        {"t": 10.0 + 0.5 * i, "cpu": 50.0,
         "procs": [{"pid": 7, "cpu": 90.0, "rq_wait": 0.05 * i}, {"pid": 8, "rq_wait": 9.0 * i}]}
        for i in range(4)
    ]  # fmt: skip
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ws = [
        Window(10, 0.5, 100.0, 20.0, 0.05, span=(10.25, 10.75)),
        Window(20, 1.0, 100.0, 20.0, 0.05, span=(10.75, 11.75)),
    ]
    a, b = with_runner_load(ws, path, pid=7)
    assert a.cpu_wait_s == pytest.approx(0.05)
    assert a.uncontended_samples_per_s == pytest.approx(100.0 * 0.5 / 0.45)
    assert b.cpu_wait_s == pytest.approx(0.15 - 0.075)  # up to the last sample only
    assert Window.from_json(a.to_json()).cpu_wait_s == pytest.approx(0.05)
    (c,) = with_runner_load(ws[:1], path, pid=99)  # a pid never sampled: not measured
    assert c.cpu_wait_s is None and c.uncontended_samples_per_s is None
