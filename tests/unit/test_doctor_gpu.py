"""GPU checks with NVML faked at the ``pynvml`` boundary (this machine has no driver).

The real gatherer runs against patched pynvml functions: healthy, throttled, degraded PCIe, MIG
(utilization NotSupported), ECC errors, other tenants, and no driver at all.
"""

from __future__ import annotations

from dataclasses import replace

import pynvml
import pytest
from doctor_data.fake_nvml import UNSUPPORTED, FakeGpu, install

from trainprof.doctor import gpu
from trainprof.doctor.nvml import NvmlSnapshot, gather_nvml
from trainprof.doctor.torch_env import TorchFacts

CUDA_TORCH = TorchFacts(
    state="ok",
    python="python",
    version="2.4.0+cu124",
    cuda_build="12.4",
    cuda_available=True,
    device_count=1,
    devices=(("NVIDIA H100 80GB HBM3", "sm_90"),),
    arch_list=("sm_80", "sm_90"),
)
CPU_TORCH = TorchFacts(state="ok", python="python", version="2.4.0+cpu", cuda_available=False)


def rows(snap: NvmlSnapshot, torch: TorchFacts = CUDA_TORCH, env: dict[str, str] | None = None):
    return {(r.finding.id, r.status): r for r in gpu.check_gpus(snap, torch, env or {})}


def only(snap: NvmlSnapshot, check_id: str, torch: TorchFacts = CUDA_TORCH):
    found = [r for r in gpu.check_gpus(snap, torch, {}) if r.finding.id == check_id]
    assert len(found) == 1, found
    return found[0]


def test_real_nvml_on_a_machine_without_driver() -> None:
    snap = gather_nvml()
    if snap.available:
        pytest.skip("this machine has an NVIDIA driver")
    assert snap.reason and "NVML" in snap.reason
    (r,) = gpu.check_gpus(snap, CPU_TORCH, {})
    assert (r.status, r.finding.id) == ("ok", "gpu-unavailable")
    assert r.finding.title.startswith("no NVIDIA GPU / driver")


def test_driver_not_loaded_with_cuda_torch_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = install(monkeypatch, [], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    snap = gather_nvml()
    assert not snap.available and "Driver" in (snap.reason or "")
    assert calls == ["init"]
    no_cuda = replace(CUDA_TORCH, cuda_available=False, device_count=None, devices=())
    (r,) = gpu.check_gpus(snap, no_cuda, {})
    assert (r.status, r.finding.id) == ("warn", "gpu-unavailable")
    assert (
        r.finding.title == "no NVIDIA GPU / driver: torch 2.4.0+cu124 (CUDA build) will run on CPU"
    )
    # torch reaching a GPU that NVML cannot see (libnvidia-ml not mounted): sampling is blind
    (blind,) = gpu.check_gpus(snap, CUDA_TORCH, {})
    assert blind.status == "warn"
    assert blind.finding.title == "torch sees 1 CUDA device(s) but NVML is unavailable"


def test_healthy_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = install(monkeypatch, [FakeGpu()])
    snap = gather_nvml()
    assert calls == ["init", "shutdown"]
    (d,) = snap.devices
    assert (d.name, d.util_percent, d.pcie_width, d.mig_current, d.ecc_uncorrected) == (
        "NVIDIA H100 80GB HBM3",
        0,
        16,
        0,
        0,
    )
    assert snap.driver == "550.54.15" and snap.cuda_driver == 12040
    got = rows(snap)
    assert set(got) == {
        ("gpu-unavailable", "ok"),
        ("gpu-throttled", "ok"),
        ("pcie-degraded", "ok"),
        ("gpu-busy", "ok"),
        ("gpu-ecc-errors", "ok"),
    }
    avail = got[("gpu-unavailable", "ok")].finding
    assert avail.title == "1 NVIDIA GPU(s), torch sees 1"
    assert any("driver 550.54.15, supports CUDA up to 12.4" == e for e in avail.evidence)
    assert any("PCIe gen5 x16 (max gen5 x16)" in e for e in avail.evidence)


def test_hw_thermal_throttle_fails_sw_thermal_warns_power_cap_is_normal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    install(
        monkeypatch,
        [FakeGpu(throttle=0x40), FakeGpu(throttle=0x20), FakeGpu(throttle=0x4, util=99)],
    )
    snap = gather_nvml()
    throttled = [r for r in gpu.check_throttle(snap)]
    assert [(r.status, r.finding.title) for r in throttled] == [
        ("fail", "GPU 0 throttled: HW thermal slowdown"),
        ("warn", "GPU 1 throttled: SW thermal slowdown"),
    ]
    install(monkeypatch, [FakeGpu(throttle=0x4, util=99)])
    r = only(gather_nvml(), "gpu-throttled")
    assert r.status == "ok" and any("power cap" in e for e in r.finding.evidence)


def test_degraded_pcie_width_warns_idle_gen_drop_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    install(
        monkeypatch,
        [
            FakeGpu(pcie=(4, 4, 8, 16)),  # half the lanes
            FakeGpu(pcie=(1, 4, 16, 16), util=0),  # idle power saving
            FakeGpu(pcie=(3, 4, 16, 16), util=80),  # busy at a lower generation
        ],
    )
    got = gpu.check_pcie(gather_nvml())
    assert [(r.status, r.finding.title) for r in got] == [
        ("warn", "GPU 0 PCIe link degraded: x8 of x16 lanes"),
        ("warn", "GPU 2 PCIe link degraded: gen3 of gen4 under load"),
    ]
    install(monkeypatch, [FakeGpu(pcie=(1, 4, 16, 16), util=0)])
    r = only(gather_nvml(), "pcie-degraded")
    assert r.status == "ok" and any("while idle" in e for e in r.finding.evidence)


def test_mig_makes_utilization_unavailable_not_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, [FakeGpu(mig=(1, 1), util=UNSUPPORTED, throttle=UNSUPPORTED)])
    snap = gather_nvml()
    assert snap.devices[0].util_percent is None
    assert "util n/a" in gpu.describe(snap.devices[0])
    mig = only(snap, "gpu-mig")
    assert mig.status == "ok" and any("NotSupported" in e for e in mig.finding.evidence)
    assert only(snap, "gpu-throttled").finding.title == "clock throttle reasons not reported"


def test_pending_mig_change_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, [FakeGpu(mig=(0, 1))])
    assert only(gather_nvml(), "gpu-mig").status == "warn"


def test_uncorrected_ecc_errors_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, [FakeGpu(ecc_uncorrected=3)])
    r = only(gather_nvml(), "gpu-ecc-errors")
    assert (r.status, r.finding.title) == ("fail", "GPU 0: 3 uncorrected ECC errors")


def test_consumer_card_without_ecc_or_pcie_info(monkeypatch: pytest.MonkeyPatch) -> None:
    install(
        monkeypatch, [FakeGpu(name="NVIDIA GeForce RTX 4090", ecc=UNSUPPORTED, pcie=UNSUPPORTED)]
    )
    got = rows(gather_nvml())
    assert ("gpu-ecc-errors", "ok") not in got and ("pcie-degraded", "ok") not in got


def test_other_tenants_make_a_gpu_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    install(
        monkeypatch, [FakeGpu(processes=[(4242, 30 * 1024**3)], memory_used=31 * 1024**3, util=95)]
    )
    r = only(gather_nvml(), "gpu-busy")
    assert r.status == "warn"
    assert "PID 4242 (30.0 GiB)" in r.finding.evidence[0]


def test_cpu_only_torch_on_a_gpu_machine_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, [FakeGpu(), FakeGpu()])
    r = only(gather_nvml(), "gpu-unavailable", torch=CPU_TORCH)
    assert (r.status, r.finding.title) == (
        "fail",
        "torch 2.4.0+cpu is a CPU-only build: 2 GPU(s) unused",
    )
    assert r.finding.fix == ("install a CUDA build of torch (cu124 or older) in this environment",)


def test_torch_newer_than_driver_and_missing_arch_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, [FakeGpu()], cuda_driver=11080)
    newer = TorchFacts(
        state="ok",
        python="python",
        version="2.4.0+cu124",
        cuda_build="12.4",
        cuda_available=False,
        cuda_warnings=("CUDA initialization: The NVIDIA driver on your system is too old",),
        devices=(("NVIDIA H100", "sm_90"),),
        arch_list=("sm_80",),
    )
    r = only(gather_nvml(), "gpu-unavailable", torch=newer)
    assert r.status == "fail"
    assert "torch needs CUDA 12.4, the driver supports up to 11.8" in r.finding.title
    assert "torch.cuda.is_available() is False" in r.finding.title
    assert "torch has no kernels for sm_90" in r.finding.title
    assert any("driver on your system is too old" in e for e in r.finding.evidence)


def test_nvml_errors_mid_read_leave_fields_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, [FakeGpu()])

    def lost(h: object) -> object:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)

    monkeypatch.setattr(pynvml, "nvmlDeviceGetName", lost)
    monkeypatch.setattr(pynvml, "nvmlDeviceGetMemoryInfo", lost)
    (d,) = gather_nvml().devices
    assert (d.name, d.memory_total) == ("unknown", None)
    assert "unknown, unknown used" in gpu.describe(d)


def test_cuda_visible_devices_is_shown_allowlisted(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, [FakeGpu()])
    got = rows(gather_nvml(), env={"CUDA_VISIBLE_DEVICES": "0"})
    assert "CUDA_VISIBLE_DEVICES=0" in got[("gpu-unavailable", "ok")].finding.evidence


def busy_and_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three H100s: GPU 0 and 1 run other tenants' jobs, GPU 2 is idle."""
    tenant = {"processes": [(4242, 30 * 1024**3)], "memory_used": 31 * 1024**3, "util": 95}
    install(monkeypatch, [FakeGpu(**tenant), FakeGpu(**tenant), FakeGpu()])


def test_gpus_hidden_by_cuda_visible_devices_are_not_judged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    busy_and_idle(monkeypatch)
    snap = gather_nvml()
    everything = [r for r in gpu.check_gpus(snap, CUDA_TORCH, {}) if r.finding.id == "gpu-busy"]
    assert [r.finding.title for r in everything] == [
        "GPU 0 is already in use",
        "GPU 1 is already in use",
    ]
    for spec in ("2", "GPU-00000002", "GPU-00000002-0000-0000-0000-000000000000"):
        got = rows(snap, env={"CUDA_VISIBLE_DEVICES": spec})
        assert ("gpu-busy", "warn") not in got, spec
        assert got[("gpu-busy", "ok")].finding.title == "1 GPU(s) idle (GPU 2)", spec
    # CUDA stops at the first entry that names no GPU: "2,7,0" is GPU 2 alone
    assert ("gpu-busy", "warn") not in rows(snap, env={"CUDA_VISIBLE_DEVICES": "2,7,0"})
    both = [
        r.finding.title
        for r in gpu.check_gpus(snap, CUDA_TORCH, {"CUDA_VISIBLE_DEVICES": "1,2"})
        if r.finding.id == "gpu-busy"
    ]
    assert both == ["GPU 1 is already in use"]


def test_indices_of_mixed_gpu_models_are_not_trusted_to_be_nvmls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # CUDA numbers GPUs fastest first, NVML by PCI bus: with two models the index "1" may be
    # either GPU, so both are judged (unless CUDA_DEVICE_ORDER=PCI_BUS_ID says the orders agree).
    tenant = {"processes": [(4242, 30 * 1024**3)], "memory_used": 31 * 1024**3, "util": 95}
    install(monkeypatch, [FakeGpu(name="NVIDIA A100-SXM4-40GB", **tenant), FakeGpu()])
    snap = gather_nvml()
    assert ("gpu-busy", "warn") in rows(snap, env={"CUDA_VISIBLE_DEVICES": "1"})
    pci = {"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert ("gpu-busy", "warn") not in rows(snap, env=pci)
