"""Which processes the host sampler reads smaps_rollup of on a tick, and how the CPU budget
holds the reads back."""

from __future__ import annotations

from trainprof.collect.samplers.smaps import AGE_BUDGET, BURST_S, MAX_AGE_S, SmapsSchedule

MIB = 2**20


def read_all(s: SmapsSchedule, now: float, rss: dict[int, int], cost_s: float = 0.001) -> list[int]:
    """Read every due process the credit allows, each read costing ``cost_s``."""
    done = []
    for pid in s.due(now, rss):
        if not s.may_read():
            break
        s.done(pid, now, rss[pid], cost_s)
        done.append(pid)
    return done


def test_new_processes_first_then_new_highs_and_falls_then_old_reads() -> None:
    s = SmapsSchedule(budget=1.0)
    assert read_all(s, 0.0, {1: 300 * MIB}) == [1]
    assert read_all(s, 0.5, {1: 302 * MIB}) == []  # 2 MiB above its last read: not due
    assert read_all(s, 1.0, {1: 305 * MIB}) == [1]  # 5 MiB above: a new high, due
    assert read_all(s, 1.5, {1: 295 * MIB}) == []  # the allocator's swings down: not due
    assert read_all(s, 2.0, {1: 280 * MIB}) == [1]  # 25 MiB below: due
    assert read_all(s, 2.0 + MAX_AGE_S - 0.1, {1: 280 * MIB}) == []
    assert read_all(s, 2.0 + MAX_AGE_S, {1: 280 * MIB}) == [1]  # old enough


def test_a_fork_makes_every_process_due_its_parent_shares_pages_now() -> None:
    s = SmapsSchedule(budget=1.0)
    read_all(s, 0.0, {1: 600 * MIB})
    assert read_all(s, 0.5, {1: 600 * MIB, 2: 590 * MIB}) == [2, 1]  # the new one first
    assert read_all(s, 1.0, {1: 600 * MIB, 2: 590 * MIB}) == []
    assert read_all(s, 1.5, {1: 600 * MIB}) == [1]  # the worker exited: fewer sharers


def test_reads_stop_when_the_credit_is_spent_and_resume_at_the_budgets_pace() -> None:
    s = SmapsSchedule(budget=0.01)
    pids = dict.fromkeys(range(1, 9), 300 * MIB)
    cost = BURST_S * 0.3
    first = read_all(s, 0.0, pids, cost_s=cost)  # the burst covers 4 reads (the 4th in debt)
    assert first == [1, 2, 3, 4] and s.credit_s < 0
    assert read_all(s, 0.5, pids) == []  # 0.5 s at 1 % of a CPU: not back above zero
    later = read_all(s, 0.5 + 2 * BURST_S / 0.01, pids, cost_s=cost)  # refilled, to the cap
    assert later == [5, 6, 7, 8]
    assert s.reads == 8 and abs(s.spent_s - 8 * cost) < 1e-9


def test_reads_for_age_alone_wait_longer_when_the_tree_is_dear_to_read() -> None:
    """9 processes at 20 ms a read: every 10 s would be 1.8 % of a CPU; at most AGE_BUDGET."""
    s = SmapsSchedule(budget=1.0, burst_s=10.0)
    pids = dict.fromkeys(range(1, 10), 1024 * MIB)
    assert len(read_all(s, 0.0, pids, cost_s=0.02)) == 9
    wait = 0.02 * 9 / AGE_BUDGET  # 72 s
    assert read_all(s, MAX_AGE_S, pids) == []
    assert read_all(s, wait - 0.1, pids) == []
    assert len(read_all(s, wait, pids)) == 9
