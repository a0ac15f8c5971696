"""cpu-starved leads only when the loop's own wait is large and a fix of its is predicted to
gain; otherwise the cause it compounds with (the loop's own CPU work) comes first, and it
follows as a note on it."""

from __future__ import annotations

from trainprof.analysis.findings import Finding
from trainprof.analysis.pipeline import CPU_WAIT_LEADS, cause_first

NOT_PREDICTED = "run it where its CPUs are its own — effect not predicted"
PREDICTED = "torch.set_num_threads(1) — expected: about 20 % faster (from the measured wait)"


def starved(impact: float, fix: str) -> Finding:
    return Finding("cpu-starved", "warning", "CPU-starved", ("waited",), (fix,), impact)


def ids(findings: tuple[Finding, ...]) -> list[str]:
    return [f.id for f in cause_first(findings)]


INPUT = Finding("input-bound", "warning", "Input-bound", ("waits",), ("cheaper batches",), 0.3)
LOGGING = Finding("logging-overhead", "warning", "Logging", ("logs",), ("log less",), 0.1)


def test_an_unpredicted_wait_follows_the_cause_it_compounds_with() -> None:
    order = ids((starved(0.4, NOT_PREDICTED), INPUT, LOGGING))
    assert order == ["input-bound", "cpu-starved", "logging-overhead"]


def test_a_small_wait_follows_even_with_a_predicted_fix() -> None:
    small = CPU_WAIT_LEADS - 0.05
    assert ids((starved(small, PREDICTED), INPUT)) == ["input-bound", "cpu-starved"]


def test_a_large_wait_with_a_predicted_gain_leads() -> None:
    assert ids((starved(0.4, PREDICTED), INPUT)) == ["cpu-starved", "input-bound"]


def test_cpu_work_of_the_loop_is_a_cause_it_compounds_with() -> None:
    """A logging stall, per-step overhead, a CPU stall: work the wait for a CPU slows."""
    assert ids((starved(0.4, NOT_PREDICTED), LOGGING)) == ["logging-overhead", "cpu-starved"]


MEMORY = Finding("memory-growth", "warning", "Memory grows", ("grows",), ("bound it",))


def test_alone_or_beside_no_cause_it_compounds_with_it_stays() -> None:
    assert ids((starved(0.4, NOT_PREDICTED),)) == ["cpu-starved"]
    assert ids((starved(0.4, NOT_PREDICTED), MEMORY)) == ["cpu-starved", "memory-growth"]


def test_where_it_does_not_lead_it_stays_in_place() -> None:
    stall = Finding("cpu-stall", "warning", "CPU stall", ("stalls",), ("move it",), 0.05)
    big = Finding("logging-overhead", "warning", "Logging", ("logs",), ("log less",), 0.5)
    order = ids((big, starved(0.4, NOT_PREDICTED), stall))
    assert order == ["logging-overhead", "cpu-starved", "cpu-stall"]
