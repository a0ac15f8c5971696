"""The job's peak memory counts pages forked DataLoader workers share with their parent once:
a real job whose parent holds a large array that 3 forked workers read, under `trainprof run`."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_trainprof, write_script

from trainprof.units import fmt_bytes

pytestmark = [pytest.mark.slow, pytest.mark.parallel]  # judges no timing or load (CONTRIBUTING)
MIB = 2**20
ARRAY_MIB = 384
WORKERS = 3

SHARED_ARRAY = f"""
    import time, torch
    from torch.utils.data import DataLoader, Dataset

    torch.set_num_threads(1)
    # real pages (ones, not zeros: never the kernel's shared zero page), made before the fork
    shared = torch.ones({ARRAY_MIB} * 2**20 // 8, dtype=torch.float64)

    class Rows(Dataset):
        def __len__(self):
            return 1 << 16

        def __getitem__(self, i):
            # every worker reads all of the parent's array: its pages are in each one's RSS
            return torch.full((8,), float(shared[:: 4096].sum()) + i)

    loader = DataLoader(Rows(), batch_size=4, num_workers={WORKERS},
                        multiprocessing_context="fork", persistent_workers=True)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    t0 = time.monotonic()
    for x in loader:
        opt.zero_grad(); model(x).sum().backward(); opt.step()
        time.sleep(0.01)
        if time.monotonic() - t0 > 6:
            break
"""


def test_forked_workers_sharing_an_array_count_it_once(tmp_path: Path) -> None:
    """Summed RSS counts the array once per process (4 times here); the reported peak, PSS
    summed, about once: at least the array, and at most the RSS sum less 2 of its copies."""
    script = write_script(tmp_path, "shared_array.py", SHARED_ARRAY)
    res = run_trainprof(tmp_path, str(script), timeout=240)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.report is not None
    summary = res.report["summary"]
    peak = summary["peak_memory"]
    array = ARRAY_MIB * MIB
    assert peak["basis"] == "pss", peak
    assert summary["peak_rss_bytes"] == peak["bytes"]
    rss_sum = peak["rss_sum_bytes"]
    assert rss_sum >= (WORKERS + 1) * array, peak  # the overcount this fixes
    assert array <= peak["bytes"] <= rss_sum - 2 * array, peak
    assert f"peak memory  {fmt_bytes(peak['bytes'])} PSS (job and workers" in res.stderr
