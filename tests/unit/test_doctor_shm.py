"""shm-small: /dev/shm against the batches DataLoader workers keep in flight."""

from __future__ import annotations

from pathlib import Path

from doctor_data.tmpfs import tiny_tmpfs

from trainprof.doctor.base import MiB
from trainprof.doctor.shm import ShmInputs, check_shm, gather_shm, required_bytes


def shm(free_mib: float, workers: int | None = None, batch_mb: float | None = None) -> ShmInputs:
    free = int(free_mib * MiB)
    return ShmInputs("/dev/shm", True, free, free, workers, batch_mb)


def test_docker_default_64mib_fails_with_assumed_job() -> None:
    # GIVEN Docker's default 64 MiB and no job description
    r = check_shm(shm(64))
    # THEN the check fails, says what it assumed, and gives the docker fix
    assert (r.status, r.finding.id, r.finding.severity) == ("fail", "shm-small", "error")
    assert "64.0 MiB" in r.finding.title
    assert any("assumed" in e for e in r.finding.evidence)
    assert any("--shm-size" in f for f in r.finding.fix)


def test_workers_and_batch_size_refine_the_requirement() -> None:
    need = required_bytes(8, 100)
    assert need == (8 * 2 + 2) * 100 * MiB
    assert check_shm(shm(need / MiB - 1, 8, 100)).status == "fail"
    assert check_shm(shm(need / MiB * 1.5, 8, 100)).status == "warn"
    ok = check_shm(shm(need / MiB * 2, 8, 100))
    assert ok.status == "ok" and ok.finding.severity == "info" and ok.finding.fix == ()
    assert not any("assumed" in e for e in ok.finding.evidence)


def test_no_workers_needs_no_shm() -> None:
    assert check_shm(shm(1, workers=0, batch_mb=500)).status == "ok"


def test_missing_shm_warns() -> None:
    r = check_shm(gather_shm("/no/such/shm"))
    assert r.status == "warn" and "missing" in r.finding.title


def test_real_dev_shm_on_this_machine() -> None:
    inp = gather_shm()
    assert inp.exists and inp.total_bytes and inp.free_bytes is not None
    r = check_shm(inp)
    expected = "ok" if inp.free_bytes >= 2 * required_bytes(4, 64) else r.status
    assert r.status == expected


def test_real_tiny_tmpfs_fails(tmp_path: Path) -> None:
    # GIVEN a real 16 MiB tmpfs standing in for /dev/shm
    with tiny_tmpfs(tmp_path / "shm", "16m") as mnt:
        inp = gather_shm(str(mnt), workers=2, batch_mb=8)
    # THEN statvfs sees 16 MiB and 2 workers x 8 MB batches do not fit
    assert inp.total_bytes == 16 * MiB
    assert check_shm(inp).status == "fail"
