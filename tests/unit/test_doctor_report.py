"""The registry (every gatherer on this machine, guarded) and the console renderer."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from doctor_data.fake_nvml import FakeGpu, install
from rich.console import Console

from trainprof.doctor import registry, shm, swap
from trainprof.doctor.base import AREAS, result
from trainprof.doctor.envvars import visible_env
from trainprof.doctor.registry import DoctorOptions, DoctorReport, run_doctor
from trainprof.render.doctor_console import render_doctor

# DESIGN.md's "environment" ids plus the ones doctor added (add, never rename)
KNOWN_IDS = {
    "shm-small", "nofile-low", "swap-active", "cpu-quota", "memory-limit", "gpu-unavailable",
    "gpu-throttled", "pcie-degraded", "ptrace-blocked", "launch-blocking",
    "thread-oversubscription", "torch-missing",
    "gpu-busy", "gpu-ecc-errors", "gpu-mig", "py-spy-missing", "ckpt-disk-low", "data-read-slow",
    "cpu-load",
}  # fmt: skip
NO_TORCH = (sys.executable, "-S")  # a real interpreter that cannot import torch: fast
SECRET = "hf_s3cr3tTOKENvalue0123456789"


def test_every_gatherer_on_this_machine(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.bin").write_bytes(b"a" * 4096)
    env = {"PATH": "/usr/bin:/bin", "HF_TOKEN": SECRET, "OMP_NUM_THREADS": "1"}
    report = run_doctor(
        DoctorOptions(workers=1, batch_mb=8, ckpt_dir=tmp_path, data=tmp_path / "data"),
        environ=env,
        torch_python=NO_TORCH,
    )
    ids = {c.finding.id for c in report.checks}
    assert ids <= KNOWN_IDS
    assert {
        "shm-small",
        "nofile-low",
        "swap-active",
        "cpu-quota",
        "cpu-load",
        "memory-limit",
    } <= ids
    assert {"thread-oversubscription", "torch-missing", "launch-blocking", "gpu-unavailable"} <= ids
    assert {"ckpt-disk-low", "data-read-slow"} <= ids
    assert ids & {"ptrace-blocked", "py-spy-missing"}
    areas = [c.area for c in report.checks]
    assert areas == sorted(areas, key=AREAS.index)  # grouped, in the documented order
    torch_row = next(c for c in report.checks if c.finding.id == "torch-missing")
    assert torch_row.status == "warn"  # -S: torch not importable
    assert report.env == {"OMP_NUM_THREADS": "1"}
    doc: dict[str, Any] = report.to_json()
    text = json.dumps(doc)
    assert SECRET not in text and "HF_TOKEN" not in text
    assert doc["schema"] == "trainprof.doctor/1"
    for row in doc["checks"]:
        assert list(row) == [
            "area",
            "status",
            "id",
            "severity",
            "title",
            "impact",
            "evidence",
            "where",
            "hotspot",
            "claims",
            "fix",
        ]
        assert {"ok": "info", "warn": "warning", "fail": "error"}[row["status"]] == row["severity"]


def test_a_gatherer_that_raises_becomes_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a: object, **k: object) -> None:
        raise PermissionError("statvfs denied")

    monkeypatch.setattr(shm, "gather_shm", boom)
    report = run_doctor(DoctorOptions(), environ={}, torch_python=NO_TORCH, live_attach=False)
    (row,) = [c for c in report.checks if c.finding.id == "shm-small"]
    assert (
        row.status == "warn" and row.finding.title == "could not run this check (PermissionError)"
    )
    assert row.finding.evidence == ("statvfs denied",)


def test_fake_gpus_flow_through_to_exit_code(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, [FakeGpu(throttle=0x8), FakeGpu(pcie=(4, 4, 4, 16))])
    report = run_doctor(DoctorOptions(), environ={}, torch_python=NO_TORCH, live_attach=False)
    gpu_rows = {(c.finding.id, c.status) for c in report.checks if c.area == "gpu"}
    assert ("gpu-throttled", "fail") in gpu_rows and ("pcie-degraded", "warn") in gpu_rows
    assert report.exit_code() == 1


def test_slow_gatherers_overlap_the_torch_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a torch whose import takes 1.0 s and a swap sample that takes 2.0 s
    pkg = tmp_path / "torch"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import time\ntime.sleep(1.0)\nraise ImportError('slow')\n")
    real_gather_swap = swap.gather_swap

    def slow_swap() -> swap.SwapInputs:
        time.sleep(2.0)
        return real_gather_swap(sample_s=0.0)

    monkeypatch.setattr(swap, "gather_swap", slow_swap)
    # WHEN the doctor runs
    report = run_doctor(DoctorOptions(), environ={**os.environ, "PYTHONPATH": str(tmp_path)})
    # THEN they ran side by side, not one after the other (3.0 s)
    assert any(c.finding.evidence[-1] == "ImportError: slow" for c in report.checks)
    assert 2.0 <= report.elapsed_s < 2.9


def test_exit_codes_and_strict() -> None:
    ok = result("cpu", "ok", "cpu-quota", "fine")
    warn = result("torch", "warn", "launch-blocking", "slow")
    fail = result("shm", "fail", "shm-small", "tiny")
    opts = DoctorOptions()
    assert DoctorReport((ok,), {}, 0.1, opts).exit_code() == 0
    assert DoctorReport((ok, warn), {}, 0.1, opts).exit_code() == 0
    assert DoctorReport((ok, warn), {}, 0.1, opts).exit_code(strict=True) == 1
    assert DoctorReport((fail,), {}, 0.1, opts).exit_code() == 1
    assert DoctorReport((ok, warn, fail), {}, 0.1, opts).counts() == {"ok": 1, "warn": 1, "fail": 1}


def test_console_table_groups_by_area_and_keeps_brackets() -> None:
    rows = (
        result(
            "shm",
            "fail",
            "shm-small",
            "/dev/shm too small",
            ("64.0 MiB [docker default]",),
            ("docker run --shm-size=8g",),
        ),
        result(
            "gpu",
            "ok",
            "gpu-unavailable",
            "no NVIDIA GPU / driver: training runs on CPU",
            ("arch ['sm_90']",),
        ),
        result(
            "gpu", "warn", "gpu-busy", "GPU 0 is already in use", (), ("CUDA_VISIBLE_DEVICES=1",)
        ),
    )
    report = DoctorReport(rows, {"CUDA_VISIBLE_DEVICES": "0"}, 1.23, DoctorOptions())
    console = Console(record=True, width=100, color_system=None)
    render_doctor(report, console)
    out = console.export_text()
    assert "environment: CUDA_VISIBLE_DEVICES=0" in out
    assert "[docker default]" in out and "['sm_90']" in out
    assert "FAIL" in out and "fix: docker run --shm-size=8g" in out
    assert out.count("gpu ") == 1  # the area is named once for its group
    assert "1 ok, 1 warn, 1 fail in 1.2 s: exit 1 (a check failed)" in out


def test_allowlist_never_lets_other_variables_through() -> None:
    env = {
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "WANDB_API_KEY": SECRET,
        "CUDA_LAUNCH_BLOCKING": "1",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
    }
    assert visible_env(env) == {
        "CUDA_LAUNCH_BLOCKING": "1",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
    }
    assert registry.SCHEMA == "trainprof.doctor/1"
