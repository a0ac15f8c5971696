"""Every GPU zoo case under ``trainprof run`` on a real GPU; skipped where CUDA is missing.

Each case must get its expected finding first among warnings and errors (the healthy control
none, and the verdict "gpu-bound"), and each report must carry the device timeline (at least
``MIN_TIMED`` timed steps in the steady window). py-spy may be missing on the GPU machine: the
runs still work and stack-based rules are skipped; a case whose expected rule needs stacks is
then skipped, not failed. ``.pyspy/bin`` (where ``make gpu-check`` installs a carried py-spy
wheel) goes on PATH when it exists.

With ``GPU_CHECK_ARTIFACTS`` set, each report is copied there (``<case>.json``), so a GPU
session gets the reports back even when an assertion fails.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import Result, assert_rules_ran, run_trainprof
from gpu_helpers import cuda_available, gpu_env, keep

from trainprof.examples.zoo import ZOO, script_path

GPU_CASES = sorted(n for n, c in ZOO.items() if c.kind == "gpu")
MIN_TIMED = 8
# Cases that train on the CPU of the GPU machine: no device timeline to check.
ON_CPU = {"gpu_forgot_device"}


pytestmark = pytest.mark.skipif(not cuda_available(), reason="no CUDA device")


def digest(r: Result) -> str:
    """What a failed assertion shows: the verdict, the device view, the ledger, findings."""
    rep: dict[str, Any] = r.report or {}
    if not rep:
        return f"exit {r.returncode}, no report\n{r.stderr[-3000:]}"
    s = rep.get("summary") or {}
    buckets = ((rep.get("ledger") or {}).get("buckets") or {}).items()
    top = sorted(buckets, key=lambda kv: -kv[1]["share"])[:6]
    lines = [
        f"exit {r.returncode}; {s.get('steps')} steps, {s.get('steps_per_s')} steps/s; "
        f"gpu util {s.get('gpu_util_mean')}; bottleneck {s.get('bottleneck')}",
        f"device {json.dumps(rep.get('device'))}",
        f"mfu {json.dumps(s.get('mfu'))}",
        "ledger " + ", ".join(f"{b} {v['share']:.0%}" for b, v in top),
    ]
    for f in rep.get("findings", []):
        lines.append(f"  {f['severity']} {f['id']} impact={f['impact']}: {f['title']}")
        lines.extend(f"      {e}" for e in f["evidence"][:3])
    lines.append("skipped: " + "; ".join(f"{k['id']} ({k['reason']})" for k in rep["skipped"]))
    return "\n".join(lines)


_cache: dict[str, Result] = {}


def run_case(name: str, tmp: Path) -> Result:
    if name not in _cache:
        case = ZOO[name]
        r = run_trainprof(
            tmp,
            str(script_path(name)),
            env=gpu_env(),
            timeout=case.timeout_s + 60,
            run_args=("--interval", "0.2", "--timeout", str(case.timeout_s)),
        )
        keep(name, r)
        _cache[name] = r
    return _cache[name]


@pytest.fixture(scope="module")
def zoo_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gpuzoo")


def test_every_gpu_script_is_registered() -> None:
    on_disk = {p.stem for p in script_path("gpu_fp32").parent.glob("gpu_*.py")}
    assert on_disk == set(GPU_CASES)


@pytest.mark.parametrize("name", GPU_CASES)
def test_gpu_zoo_case(name: str, zoo_tmp: Path) -> None:
    r = run_case(name, zoo_tmp)
    assert r.returncode == 0, digest(r)
    assert r.report is not None, digest(r)
    if name not in ON_CPU:
        device = r.report.get("device")
        assert device is not None, f"{name}: no device timeline\n{digest(r)}"
        assert device["timed_steps"] >= MIN_TIMED, f"{name}: too few timed steps\n{digest(r)}"
    expect = ZOO[name].expect
    if expect is None:
        assert r.problems == [], f"{name} must get no warning\n{digest(r)}"
        assert_rules_ran(r.report)
        verdict = (r.report["summary"].get("bottleneck") or {}).get("verdict")
        assert verdict == "gpu-bound", f"{name}\n{digest(r)}"
        return
    skipped = {k["id"]: k["reason"] for k in r.report["skipped"]}
    if expect in skipped:
        pytest.skip(f"{name}: {expect} was skipped: {skipped[expect]}")
    assert r.problems and r.problems[0] == expect, f"{name}: expected {expect}\n{digest(r)}"


def test_mfu_is_measured_against_the_cards_peak(zoo_tmp: Path) -> None:
    """One counted step of the healthy bf16 control: a real FLOP count, the card's bf16 peak
    (H100 and H200 are in the table), an MFU between 0 and 1, and the counted step is warm-up."""
    r = run_case("gpu_healthy", zoo_tmp)
    assert r.report is not None, digest(r)
    u = r.report["summary"]["mfu"]
    assert u is not None, digest(r)
    assert u["flops_per_step"] > 0 and u["failed_ops"] == 0, digest(r)
    assert u["precision"] == "bf16" and u["peak_tflops"] is not None, digest(r)
    assert 0.0 < u["mfu"] < 1.0, digest(r)
    assert r.report["summary"]["warmup_steps_excluded"] >= u["counted_step"], digest(r)


def test_the_jobs_gpu_is_told_by_its_cuda_uuid(zoo_tmp: Path) -> None:
    """torch's device UUID (as the probe records it) matches NVML's for the GPU the healthy
    control trained on, so the utilization judged is that GPU's, not the machine's mean."""
    r = run_case("gpu_healthy", zoo_tmp)
    assert r.report is not None, digest(r)
    gpus = r.report["summary"]["gpus"]
    assert gpus is not None and gpus["by"] == "uuid", f"{gpus}\n{digest(r)}"
    assert len(gpus["indices"]) == 1 and gpus["of"] >= 1, digest(r)
    assert r.report["summary"]["gpu_util_mean"] is not None, digest(r)


def test_launch_blocking_is_named_on_the_healthy_control(zoo_tmp: Path) -> None:
    """The healthy bf16 control run with CUDA_LAUNCH_BLOCKING=1 (300 steps): each launch waits
    for its kernel, and launch-blocking comes first (not launch-bound's bigger batch)."""
    r = run_trainprof(
        zoo_tmp,
        str(script_path("gpu_healthy")),
        env={**gpu_env(), "CUDA_LAUNCH_BLOCKING": "1"},
        timeout=ZOO["gpu_healthy"].timeout_s + 60,
        run_args=("--interval", "0.2", "--steps", "300"),
    )
    keep("gpu_healthy_launch_blocking", r)
    assert r.report is not None, digest(r)
    assert r.problems and r.problems[0] == "launch-blocking", digest(r)
    assert "launch-bound" not in r.problems, digest(r)
