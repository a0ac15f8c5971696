"""The blind set (tests/blind/): twelve realistic scripts with one mistake each, written without
reading the rules, and two healthy controls; trainprof's first finding and its `where` against
what an expert expects (tests/blind/EXPECTED.md). The misses trainprof still makes are listed
here, and a miss that turns right fails too, so that the list is kept true."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BLIND = Path(__file__).resolve().parents[1] / "blind"
sys.path.insert(0, str(BLIND))
from score import Expected, read_expected, run_one  # noqa: E402

# The expert expects logging-overhead; the function's time is mostly its per-parameter
# histograms, which trainprof names (loop-overhead, at log_metrics).
ID_MISSES = {"json_metrics_gen.py"}
WHERE_MISSES: set[str] = set()


# Named in some runs and not in others: a miss here is reported (an xfail that says what was
# found), not hidden, until fixed.
UNSTABLE: set[str] = set()


@pytest.mark.parametrize("exp", read_expected(), ids=lambda e: e.script)
def test_the_first_finding_is_the_experts(exp: Expected, tmp_path: Path) -> None:
    out = run_one(exp, tmp_path)
    if exp.script in UNSTABLE and not out.id_ok:
        pytest.xfail(f"unstable: {out.finding} instead of {exp.finding} in this run")
    assert out.id_ok == (exp.script not in ID_MISSES), (exp, out)
    if exp.where and out.id_ok:
        assert out.where_ok == (exp.script not in WHERE_MISSES), (exp, out)


def test_two_compounding_causes_are_said_by_whichever_leads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blind set D's keyword spotter: 4 workers rebuilding a mel filterbank per clip, beside
    torch's 2 intra-op threads, on 2 CPUs. The loop waits for data and for a CPU, each about a
    third of its time, and either may rank first (3 runs: cpu-starved twice, input-bound once);
    the first names the other, run after run."""
    folder = BLIND.parent / "blind_d"
    (exp,) = [e for e in read_expected(folder) if e.script == "keyword_spotting_workers.py"]
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # the mistake is torch's default threads
    out = run_one(exp, tmp_path, folder)
    assert out.finding in ("input-bound", "cpu-starved"), out
    assert out.both_ok, out


# Blind set G (tests/blind_g/): twelve scripts on the kind of work that fills a step (waits on
# another program or a lock, Python and numpy inside the forward, workers' memory, tensors
# logged as text, periodic or per-step work, uncaught exceptions) and two controls. Scored
# under a load average of 1 to 14 from other sessions on 2 CPUs: 2/12 (where 2/12, controls
# 0/2) before issue 49's work, 10/12 (where 10/12, controls 1/2) after; the misses, below, were
# led by cpu-starved at 44-72 %, which this machine's load made true. On a quiet machine they
# are to be scored again: until then a miss there is reported (an xfail saying what was found).
BLIND_G = BLIND.parent / "blind_g"
G_ID_MISSES: set[str] = set()
G_WHERE_MISSES: set[str] = set()
# The workers' cache was memory-growth first (an error) in 2 runs of 4, cpu-starved first in
# the others: its steady window is ~3 s, 6 memory reads, and a loaded run has fewer.
# The REINFORCE control was clean in one run, cpu-starved (a true 42 % wait) in the other.
G_LOAD_SWAYED = {
    "audio_worker_cache.py",
    "cnn_numpy_augment.py",
    "control_async_metrics.py",
    "control_reinforce_cartpole.py",
    "gnn_metrics_lock.py",  # found under load; nothing found in a quiet CI run
}


@pytest.mark.parametrize("exp", read_expected(BLIND_G), ids=lambda e: e.script)
def test_blind_set_g_first_finding_is_the_experts(exp: Expected, tmp_path: Path) -> None:
    out = run_one(exp, tmp_path, BLIND_G)
    if exp.script in G_LOAD_SWAYED and not out.id_ok:
        pytest.xfail(f"load-swayed: {out.finding} instead of {exp.finding} in this run")
    assert out.id_ok == (exp.script not in G_ID_MISSES), (exp, out)
    if exp.where and out.id_ok:
        assert out.where_ok == (exp.script not in G_WHERE_MISSES), (exp, out)
