"""ckpt-disk-low / data-read-slow: room for checkpoints, and a short read test of the dataset."""

from __future__ import annotations

from pathlib import Path

from doctor_data.tmpfs import tiny_tmpfs

from trainprof.doctor.base import GiB, MiB
from trainprof.doctor.disk import (
    CkptInputs,
    DataReadInputs,
    check_ckpt,
    check_data_read,
    gather_ckpt,
    gather_data_read,
)


def ckpt(free: int, writable: bool = True) -> CkptInputs:
    return CkptInputs("/ckpt", "/ckpt", True, writable, free, 500 * GiB)


def test_checkpoint_space_thresholds() -> None:
    assert check_ckpt(ckpt(1 * GiB)).status == "fail"
    assert check_ckpt(ckpt(10 * GiB)).status == "warn"
    r = check_ckpt(ckpt(100 * GiB))
    assert (r.status, r.finding.id) == ("ok", "ckpt-disk-low")
    assert check_ckpt(ckpt(100 * GiB, writable=False)).status == "fail"


def test_ckpt_dir_not_created_yet_is_measured_on_its_parent(tmp_path: Path) -> None:
    inp = gather_ckpt(tmp_path / "runs" / "exp1")
    assert not inp.exists and inp.measured_on == str(tmp_path) and inp.free_bytes > 0
    assert "not created yet" in check_ckpt(inp).finding.evidence[0]


def test_real_full_volume_fails(tmp_path: Path) -> None:
    with tiny_tmpfs(tmp_path / "vol", "1m") as mnt:
        r = check_ckpt(gather_ckpt(mnt / "ckpt"))
    assert r.status == "fail" and r.finding.title == "only 1.0 MiB free for checkpoints"


def test_real_read_of_a_small_dataset(tmp_path: Path) -> None:
    data = tmp_path / "data" / "train"
    data.mkdir(parents=True)
    for i in range(40):
        (data / f"img_{i:03}.bin").write_bytes(bytes([i]) * (64 * 1024 + i))
    inp = gather_data_read(tmp_path / "data")
    assert inp.files_seen == 40 and inp.files_read == 40
    assert inp.bytes_read == sum(64 * 1024 + i for i in range(40))
    assert inp.median_file_bytes is not None and 64 * 1024 <= inp.median_file_bytes < 65 * 1024
    assert check_data_read(inp).finding.id == "data-read-slow"


def test_single_file_dataset_and_empty_dir(tmp_path: Path) -> None:
    f = tmp_path / "shard-000.tar"
    f.write_bytes(b"x" * (3 * MiB))
    inp = gather_data_read(f)
    assert (inp.files_read, inp.bytes_read) == (1, 3 * MiB)
    empty = tmp_path / "empty"
    empty.mkdir()
    r = check_data_read(gather_data_read(empty))
    assert r.status == "warn" and "could not read" in r.finding.title


def read(files: int, size: int, seconds: float) -> DataReadInputs:
    return DataReadInputs("/data", files, files, files * size, seconds, True, size)


def test_small_files_judged_by_files_per_second_large_by_mb_per_second() -> None:
    hdd_small = check_data_read(read(50, 100 * 1024, 0.5))  # 100 files/s
    assert hdd_small.status == "warn" and "100 files/s" in hdd_small.finding.title
    ssd_small = check_data_read(read(2000, 100 * 1024, 0.5))  # 4000 files/s
    assert ssd_small.status == "ok"
    slow_large = check_data_read(read(10, 4 * MiB, 1.0))  # 40 MB/s
    assert slow_large.status == "warn"
    fast_large = check_data_read(read(100, 4 * MiB, 0.5))  # 800 MB/s
    assert fast_large.status == "ok" and "O_DIRECT" in fast_large.finding.evidence[1]
