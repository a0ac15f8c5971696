"""The runner's live view of progress: the ranks of a distributed job step together, so its
step count and it/s are one rank's (two ranks' steps once counted double, and a hang's
evidence said "after 100 optimizer steps" of a job whose ranks had made 50 each); its
samples/s are every rank's; processes that train one after another add up."""

from __future__ import annotations

import pytest

from trainprof.collect.live import LiveStats


def step(stats: LiveStats, pid: int, t_s: float, samples: int = 32, role: str = "rank") -> None:
    header = {"pid": pid, "role": role, "t0": 100.0}
    stats.feed(header, f"S {int(t_s * 1e6)} 10000 0 0 {samples} 1 {samples}")


def test_two_ranks_count_as_one_job() -> None:
    stats = LiveStats()
    for i in range(1, 51):  # 50 steps of 10 ms on each rank
        step(stats, 10, i * 0.01)
        step(stats, 11, i * 0.01 + 0.001)
    assert stats.progress == (50, "optimizer step")
    it_s, samples_s, _wait = stats.rate()
    assert it_s == pytest.approx(100.0, rel=0.01)
    assert samples_s == pytest.approx(2 * 32 * 100.0, rel=0.03)


def test_one_process_is_counted_as_before() -> None:
    stats = LiveStats()
    for i in range(1, 21):
        step(stats, 10, i * 0.02, samples=8, role="main")
    assert stats.progress == (20, "optimizer step")
    it_s, samples_s, _wait = stats.rate()
    assert it_s == pytest.approx(50.0, rel=0.01)
    assert samples_s == pytest.approx(400.0, rel=0.01)


def test_processes_that_train_one_after_another_add_up() -> None:
    """A sweep: one training process, then another; their steps add up, and the rate is the
    one stepping now (the first's window is forgotten, not averaged in)."""
    stats = LiveStats()
    for i in range(1, 31):
        step(stats, 10, i * 0.01, role="main")  # 100 it/s
    for i in range(1, 31):
        step(stats, 11, 20.0 + i * 0.05, role="main")  # 20 it/s, after a start-up
    assert stats.progress == (60, "optimizer step")
    it_s, _samples_s, _wait = stats.rate()
    assert it_s == pytest.approx(20.0, rel=0.01)
    assert list(stats.recent) == [11]


def test_a_job_without_an_optimizer_is_paced_by_its_backward_passes() -> None:
    """word_language_model updates its weights by hand: trainprof counts backward passes. At
    3.5 s a pass under load, one of 12.4 s was taken for a hang, since only optimizer steps
    gave the hang watch a typical pace and it fell back to 10 s."""
    from trainprof.store.schema import BACKWARD

    stats = LiveStats()
    header = {"pid": 7, "role": "main", "t0": 100.0}
    for i in range(6):
        stats.feed(header, f"{BACKWARD} {int(i * 3.5e6)}")
    assert stats.progress == (6, "backward pass")
    assert stats.typical_s == pytest.approx(3.5)


def test_a_job_paced_by_batches_and_one_by_steps() -> None:
    from trainprof.store.schema import BATCH

    stats = LiveStats()
    header = {"pid": 7, "role": "main", "t0": 100.0}
    for i in range(5):
        stats.feed(header, f"{BATCH} {int(i * 0.2e6)}")
    assert stats.typical_s == pytest.approx(0.2)
    for i in range(1, 5):
        step(stats, 8, 10 + i * 0.01, role="main")
    assert stats.typical_s == pytest.approx(0.01)  # optimizer steps, once there are any
