"""swap-active: paging now, or a swap already half full."""

from __future__ import annotations

from trainprof.doctor.base import GiB, MiB
from trainprof.doctor.swap import SwapInputs, check_swap, gather_swap, read_swappiness


def swap(total: int, used: int, rate_in: float | None = 0.0, rate_out: float | None = 0.0):
    return check_swap(SwapInputs(total, used, rate_in, rate_out, 60, 0.5))


def test_no_swap_is_ok() -> None:
    r = swap(0, 0, None, None)
    assert (r.status, r.finding.id) == ("ok", "swap-active")


def test_paging_now_warns() -> None:
    r = swap(8 * GiB, 1 * GiB, rate_in=5 * MiB, rate_out=0)
    assert r.status == "warn" and "swapping now" in r.finding.title
    assert any("vm.swappiness=10" in f for f in r.finding.fix)


def test_half_full_swap_warns_even_when_quiet() -> None:
    assert swap(8 * GiB, 5 * GiB).status == "warn"


def test_some_swap_used_but_quiet_is_ok() -> None:
    r = swap(8 * GiB, 100 * MiB)
    assert r.status == "ok"
    assert any("vm.swappiness 60" in e for e in r.finding.evidence)


def test_real_swap_of_this_machine() -> None:
    inp = gather_swap(sample_s=0.05)
    assert inp.total_bytes >= 0 and inp.used_bytes >= 0
    if inp.total_bytes:
        assert inp.swap_in_bytes_per_s is not None
    swappiness = read_swappiness()
    assert swappiness is None or 0 <= swappiness <= 200
    assert check_swap(inp).finding.id == "swap-active"
