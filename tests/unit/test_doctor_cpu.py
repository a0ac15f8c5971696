"""cpu-quota, thread-oversubscription, memory-limit, and the cgroup reader behind them.

Cgroup trees are built in a tmp dir (v2, v1, a hybrid like many Docker hosts, a namespaced
mount) and read through the same code that reads /sys/fs/cgroup on a real machine.
"""

from __future__ import annotations

from pathlib import Path

from trainprof.doctor.base import GiB
from trainprof.doctor.cgroup import (
    Throttling,
    gather_cgroup,
    quota_stat_file,
    read_cgroup_limits,
    read_throttling,
)
from trainprof.doctor.cpu import (
    CpuInputs,
    ThreadInputs,
    check_cpu,
    check_threads,
    gather_cpu,
    usable_cpus,
)
from trainprof.doctor.memory import MemoryInputs, check_memory, gather_memory

V2_MOUNT = "30 24 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"


def write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def test_cgroup_v2_parent_limit_is_tighter_than_leaf(tmp_path: Path) -> None:
    write(tmp_path, "sys/fs/cgroup/kubepods/cpu.max", "150000 100000\n")
    write(tmp_path, "sys/fs/cgroup/kubepods/memory.max", str(8 * GiB))
    write(tmp_path, "sys/fs/cgroup/kubepods/pod1/cpu.max", "max 100000\n")
    write(tmp_path, "sys/fs/cgroup/kubepods/pod1/memory.max", "max\n")
    write(tmp_path, "sys/fs/cgroup/kubepods/pod1/memory.current", str(1 * GiB))
    write(tmp_path, "sys/fs/cgroup/kubepods/memory.current", str(2 * GiB))
    lim = read_cgroup_limits("0::/kubepods/pod1\n", V2_MOUNT, tmp_path)
    assert lim.version == 2
    assert lim.cpu_quota == 1.5 and lim.cpu_source and lim.cpu_source.endswith("kubepods/cpu.max")
    assert lim.memory_limit == 8 * GiB and lim.memory_usage == 2 * GiB


def test_cgroup_v1_with_mount_root_and_unlimited_memory(tmp_path: Path) -> None:
    mountinfo = (
        "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu,cpuacct\n"
        "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
        "41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
    )
    proc = "4:memory:/docker/abc\n1:cpu,cpuacct:/docker/abc\n0::/\n"
    write(tmp_path, "sys/fs/cgroup/cpu/docker/abc/cpu.cfs_quota_us", "200000")
    write(tmp_path, "sys/fs/cgroup/cpu/docker/abc/cpu.cfs_period_us", "100000")
    write(tmp_path, "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "9223372036854771712")
    lim = read_cgroup_limits(proc, mountinfo, tmp_path)
    assert (lim.version, lim.cpu_quota, lim.memory_limit) == (1, 2.0, None)


def test_the_quotas_throttling_counters_are_read_beside_it_v1_and_v2(tmp_path: Path) -> None:
    """cpu.stat beside the tightest quota: v2 counts throttled µs, v1 ns; none without one."""
    write(tmp_path, "sys/fs/cgroup/kubepods/cpu.max", "150000 100000\n")
    write(tmp_path, "sys/fs/cgroup/kubepods/pod1/cpu.max", "max 100000\n")
    stat = "usage_usec 9\nnr_periods 40\nnr_throttled 10\nthrottled_usec 250000\n"
    write(tmp_path, "sys/fs/cgroup/kubepods/cpu.stat", stat)
    lim = read_cgroup_limits("0::/kubepods/pod1\n", V2_MOUNT, tmp_path)
    path = quota_stat_file(lim.cpu_quota, lim.cpu_source)
    assert path == tmp_path / "sys/fs/cgroup/kubepods/cpu.stat"
    assert read_throttling(path) == Throttling(40, 10, 0.25)
    v1 = tmp_path / "v1.stat"
    v1.write_text("nr_periods 161\nnr_throttled 65\nthrottled_time 5943127668\n")
    assert read_throttling(v1) == Throttling(161, 65, 5.943127668)
    assert read_throttling(tmp_path / "missing") is None
    write(tmp_path, "sys/fs/cgroup/free/cpu.max", "max 100000\n")
    free = read_cgroup_limits("0::/free\n", V2_MOUNT, tmp_path)
    assert quota_stat_file(free.cpu_quota, free.cpu_source) is None


def test_cgroup_v1_no_quota_is_minus_one(tmp_path: Path) -> None:
    mountinfo = "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
    write(tmp_path, "sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1")
    write(tmp_path, "sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000")
    assert read_cgroup_limits("1:cpu:/\n", mountinfo, tmp_path).cpu_quota is None


def test_cgroup_namespace_reads_the_mount_root(tmp_path: Path) -> None:
    # /proc/self/cgroup names a host path the namespaced mount does not contain
    mountinfo = "30 24 0:26 /kubepods/pod9 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
    write(tmp_path, "sys/fs/cgroup/cpu.max", "50000 100000")
    lim = read_cgroup_limits("0::/elsewhere\n", mountinfo, tmp_path)
    assert lim.cpu_quota == 0.5


def test_no_cgroupfs_means_no_limits(tmp_path: Path) -> None:
    lim = gather_cgroup(tmp_path)
    assert (lim.version, lim.cpu_quota, lim.memory_limit) == (None, None, None)


def test_real_cgroup_and_cpus_of_this_machine() -> None:
    lim = gather_cgroup()
    inp = gather_cpu(lim.cpu_quota, lim.cpu_source)
    assert 1 <= usable_cpus(inp) <= (inp.cpu_count or 1)
    assert check_cpu(inp).finding.id == "cpu-quota"
    mem = gather_memory(lim)
    assert mem.ram_bytes > 0
    assert check_memory(mem).finding.id == "memory-limit"


def test_quota_below_cpu_count_warns_with_worker_count() -> None:
    inp = CpuInputs(cpu_count=64, affinity=64, quota=2.0, quota_source="cpu.max")
    assert usable_cpus(inp) == 2
    r = check_cpu(inp)
    assert (r.status, r.finding.id) == ("warn", "cpu-quota")
    assert "2 of 64 CPUs" in r.finding.title
    assert any("num_workers=1" in f for f in r.finding.fix)


def test_what_the_quota_has_throttled_so_far_is_evidence() -> None:
    th = Throttling(periods=1200, throttled=420, throttled_s=31.5)
    inp = CpuInputs(64, 64, 4.0, "cpu.max", throttling=th)
    evidence = check_cpu(inp).finding.evidence
    assert (
        "the quota has throttled this cgroup in 35% of its 1200 periods since it was made "
        "(31.5 s stopped)"
    ) in evidence, evidence


def test_fractional_quota_rounds_up_and_workers_over_usable_warn() -> None:
    inp = CpuInputs(cpu_count=8, affinity=8, quota=2.5, quota_source="cpu.max", workers=6)
    assert usable_cpus(inp) == 3
    assert "--workers 6 > 3 usable CPUs" in check_cpu(inp).finding.title


def test_affinity_only_is_noted_not_warned() -> None:
    r = check_cpu(CpuInputs(cpu_count=16, affinity=4, quota=None, quota_source=None))
    assert r.status == "ok" and r.finding.title == "4 usable CPUs"
    assert any("affinity mask" in e for e in r.finding.evidence)


def test_thread_pools_bigger_than_usable_cpus_warn() -> None:
    r = check_threads(ThreadInputs(2, {"OMP_NUM_THREADS": "16"}, torch_threads=8))
    assert (r.status, r.finding.id) == ("warn", "thread-oversubscription")
    assert "OMP_NUM_THREADS=16 > 2" in r.finding.title and "torch uses 8 threads" in r.finding.title
    assert r.finding.fix == ("export OMP_NUM_THREADS=2  (or torch.set_num_threads(2) at start-up)",)


def test_bad_omp_value_and_unknown_torch() -> None:
    r = check_threads(ThreadInputs(4, {"OMP_NUM_THREADS": "auto"}, torch_threads=None))
    assert r.status == "warn" and "not a number" in r.finding.title
    assert any("unknown" in e for e in r.finding.evidence)


def test_threads_that_fit_are_ok() -> None:
    r = check_threads(ThreadInputs(4, {"OMP_NUM_THREADS": "4"}, torch_threads=4, workers=3))
    assert r.status == "ok"


def mem(limit: int | None, usage: int | None, ram: int = 64 * GiB) -> MemoryInputs:
    return MemoryInputs(ram, ram // 2, limit, usage, "memory.max")


def test_memory_limit_cases() -> None:
    assert check_memory(mem(None, None)).status == "ok"
    assert check_memory(mem(128 * GiB, 1 * GiB)).status == "ok"  # limit above RAM
    roomy = check_memory(mem(32 * GiB, 1 * GiB))
    assert roomy.status == "ok" and "32.0 GiB (cgroup)" in roomy.finding.title
    tight = check_memory(mem(8 * GiB, 5 * GiB))
    assert (tight.status, tight.finding.id) == ("warn", "memory-limit")
    full = check_memory(mem(8 * GiB, int(7.8 * GiB)))
    assert full.status == "fail" and full.finding.severity == "error"
    assert any("OOM-kills" in e for e in full.finding.evidence)
