"""`trainprof tune`'s parts that need no job: the candidates, their verdicts, the override's
parsing, and the CLI's one-line errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainprof.cli import app
from trainprof.errors import TrainprofError
from trainprof.probe.overrides import parse
from trainprof.tune.candidates import Candidate, JobSettings, candidates, parse_candidate
from trainprof.tune.search import FASTER, NOISE, SLOWER, UNDECIDED, Arm, Search


def test_candidates_on_two_cpus_skip_the_job_s_own_settings() -> None:
    names = [c.name for c in candidates(JobSettings(0, False, 1), 2)]
    assert names == [
        "num_workers=1, persistent_workers=True",
        "num_workers=2, persistent_workers=True",
        "threads=2",
    ]
    names = [c.name for c in candidates(JobSettings(1, False, 1), 2)]
    assert names == [
        "num_workers=0",
        "num_workers=2, persistent_workers=True",
        "num_workers=1, persistent_workers=True",
        "threads=2",
    ]


def test_candidates_on_many_cpus_stay_few_and_fill_the_cpus_together() -> None:
    cs = candidates(JobSettings(0, False, 16), 16)
    assert 1 <= len(cs) <= 8
    assert all(c.settings != {} for c in cs)
    both = [c.settings for c in cs if "threads" in c.settings and "num_workers" in c.settings]
    assert all(s["num_workers"] + s["threads"] == 16 for s in both)


def test_the_copy_paste_lines() -> None:
    c = Candidate({"num_workers": 2, "persistent_workers": True, "threads": 1})
    assert c.code() == [
        "DataLoader(..., num_workers=2, persistent_workers=True)",
        "torch.set_num_threads(1)",
    ]
    assert Candidate().name == "the job's own settings" and Candidate().code() == []


def test_parse_candidate_and_its_errors() -> None:
    assert parse_candidate("num_workers=2, persistent_workers=True,threads=1").settings == {
        "num_workers": 2,
        "persistent_workers": True,
        "threads": 1,
    }
    for bad in ("batch_size=64", "threads=0", "num_workers=two", "pin_memory=yes", ""):
        with pytest.raises(TrainprofError):
            parse_candidate(bad)


def test_the_override_variable_keeps_only_known_settings_of_their_type() -> None:
    assert parse(None) is None and parse("not json") is None and parse("[1]") is None
    assert parse('{"num_workers": 2, "threads": 0, "pin_memory": 1, "batch_size": 4}') == {
        "num_workers": 2
    }
    assert parse('{"persistent_workers": true, "prefetch_factor": 4, "threads": 3}') == {
        "persistent_workers": True,
        "prefetch_factor": 4,
        "threads": 3,
    }


def _search(base: list[float], mine: list[float]) -> tuple[Search, Arm]:
    s = Search(["python", "train.py"], 2)
    s.baseline.rates = base
    arm = Arm(Candidate({"num_workers": 1}), mine)
    s.arms = [arm]
    return s, arm


@pytest.mark.parametrize(
    ("base", "mine", "verdict"),
    [
        ([100.0, 104.0, 102.0], [120.0, 126.0, 123.0], FASTER),
        ([100.0, 104.0, 102.0], [80.0, 90.0, 85.0], SLOWER),
        ([100.0, 110.0, 105.0], [105.0, 120.0, 112.0], NOISE),
        ([100.0, 104.0], [150.0, 160.0], UNDECIDED),  # parted, but two runs part by chance
        ([100.0], [150.0, 151.0, 152.0], UNDECIDED),
    ],
)
def test_a_verdict_needs_three_runs_each_and_ranges_apart(
    base: list[float], mine: list[float], verdict: str
) -> None:
    s, arm = _search(base, mine)
    assert s.verdict(arm).verdict == verdict
    assert (s.best() is arm) == (verdict == FASTER)


def test_change_and_spread_are_relative_to_the_baseline_median() -> None:
    s, arm = _search([100.0, 104.0, 102.0], [120.0, 126.0, 123.0])
    v = s.verdict(arm)
    assert v.change == pytest.approx(123 / 102 - 1)
    assert v.spread == pytest.approx((6 + 4) / 2 / 102)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--candidate", "batch_size=64"], "batch_size' is not a setting tune changes"),
        (["--budget", "3", "--window", "2"], "leaves no room for two runs"),
        (["--budget", "0"], "is not a positive number of seconds"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], says: str) -> None:
    """Checked before the job starts: the job here would fail if it ran."""
    script = tmp_path / "train.py"
    script.write_text("raise SystemExit(7)\n")
    r = subprocess.run(
        [sys.executable, "-m", "trainprof", "tune", *args, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2, r.stderr
    assert says in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_tune_is_a_command() -> None:
    r = CliRunner().invoke(app, ["tune", "--help"], env={"COLUMNS": "80", "NO_COLOR": "1"})
    assert r.exit_code == 0 and "--budget" in r.output and "--candidate" in r.output


def test_the_best_line_in_the_framework_s_own_words() -> None:
    from trainprof.tune.render import framework_words

    words = framework_words("transformers", {"num_workers": 2, "persistent_workers": True})
    assert words is not None and "dataloader_num_workers" in words
    assert framework_words(None, {"num_workers": 2}) is None
    assert framework_words("transformers", {"threads": 1}) is None


def test_a_candidate_stopped_at_three_times_the_job_s_run_is_slower_without_a_rate() -> None:
    from trainprof.tune.measure import Trial
    from trainprof.tune.search import _check_trial

    s, arm = _search([100.0, 104.0, 102.0], [5.0])
    _check_trial(arm, Trial(None, "samples/s", 12, 124, 93.0, None, None, "limit"), 31.0)
    v = s.verdict(arm)
    assert (v.verdict, v.change, arm.rates) == (SLOWER, None, [])
    assert arm.problem == "its run was stopped after 93 s, 3× the job's own (31 s)"
    assert s.best() is None
