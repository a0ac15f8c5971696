"""A report quotes what `trainprof tune` measured of its own fixes on the same command: a fix
tune found faster carries the measurement, one it found slower or within noise is not advised;
without a tune run, a report whose fix sets workers or threads says how to measure them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from recorded import materialize, report_of

from trainprof.analysis.findings import Finding, Verdict
from trainprof.analysis.tuned import annotate, tunable
from trainprof.tune.saved import latest_for, save

WORKERS_FIX = (
    "DataLoader(..., num_workers=1, persistent_workers=True) so batches are prepared in "
    "parallel — expected: up to +36% samples/s (the loop waits for data 26% of the time)"
)


def _finding(*fix: str) -> Finding:
    return Finding(id="input-bound", severity="warning", title="t", evidence=("e",), fix=tuple(fix))


def _tuned(change: float, verdict: str, **settings: Any) -> dict[str, Any]:
    arm = {"settings": settings, "change": change, "spread": 0.05, "verdict": verdict}
    return {"command": ["python", "train.py"], "usable_cpus": 2, "candidates": [arm]}


def test_a_fix_tune_found_slower_is_not_advised_and_loses_its_promise() -> None:
    v = annotate(Verdict((_finding(WORKERS_FIX),)), _tuned(-0.23, "slower", num_workers=1))
    (line,) = v.findings[0].fix
    assert line.endswith("— tried by trainprof tune: -23% (±5%), slower: not advised"), line
    assert "expected: up to" not in line


def test_a_fix_tune_found_faster_carries_the_measurement() -> None:
    v = annotate(Verdict((_finding(WORKERS_FIX),)), _tuned(0.31, "faster", num_workers=1))
    assert v.findings[0].fix[0] == WORKERS_FIX + " — measured by trainprof tune: +31% (±5%)"


def test_a_candidate_of_another_value_or_setting_is_not_quoted() -> None:
    for other in (_tuned(0.3, "faster", num_workers=2), _tuned(0.3, "faster", threads=1)):
        assert annotate(Verdict((_finding(WORKERS_FIX),)), other).findings[0].fix == (WORKERS_FIX,)
    threads = "torch.set_num_threads(1) (or OMP_NUM_THREADS=1) — effect not predicted"
    v = annotate(Verdict((_finding(threads),)), _tuned(0.12, "faster", threads=1))
    assert v.findings[0].fix[0].endswith("measured by trainprof tune: +12% (±5%)")
    why = "torch.set_num_threads(1) — effect not predicted: its own threads kept its CPUs busy"
    v = annotate(Verdict((_finding(why),)), _tuned(0.12, "faster", threads=1))
    assert (
        v.findings[0].fix[0] == "torch.set_num_threads(1) — measured by trainprof tune: +12% (±5%)"
    )
    assert tunable(Verdict((_finding(threads),))) and not tunable(Verdict((_finding("x"),)))


def test_the_newest_result_of_the_same_arguments_and_cpus_is_found(tmp_path: Path) -> None:
    save(_tuned(0.1, "faster", num_workers=1), tmp_path)
    other = {**_tuned(0.5, "faster", num_workers=1), "command": ["python", "eval.py"]}
    save(other, tmp_path)
    found = latest_for(["/venv/bin/python", "train.py"], 2, tmp_path)
    assert found is not None and found["candidates"][0]["change"] == 0.1
    assert latest_for(["python", "train.py"], 4, tmp_path) is None  # measured on 2 CPUs
    assert latest_for(["python", "train.py", "--lr", "1"], 2, tmp_path) is None


def test_a_recorded_report_points_to_tune_then_quotes_it(tmp_path: Path) -> None:
    """The oversubscribed recording (torch's threads 4x the CPUs): its threads fix."""
    run_dir = materialize("oversubscribed", tmp_path)
    meta_path = run_dir / "run.json"
    meta = json.loads(meta_path.read_text())
    meta["cwd"] = str(tmp_path)  # tune's results are looked for where the job ran
    meta_path.write_text(json.dumps(meta))
    data, text = report_of(run_dir, width=200)
    (line,) = [x for f in data["findings"] for x in f["fix"] if "set_num_threads(" in x]
    assert "measure these fixes before applying them: trainprof tune " in text
    threads = int(line.split("set_num_threads(")[1].split(")")[0])
    tuned = _tuned(-0.2, "slower", threads=threads)
    save({**tuned, "command": meta["command"], "usable_cpus": meta["usable_cpus"]}, tmp_path)
    data, text = report_of(run_dir, width=200)
    (told,) = [x for f in data["findings"] for x in f["fix"] if "set_num_threads(" in x]
    assert told.endswith("— tried by trainprof tune: -20% (±5%), slower: not advised"), told
    assert "measure these fixes" not in text


def test_the_tune_line_shows_a_hostile_argument_as_visible_text(tmp_path: Path) -> None:
    """An argument with ESC and a newline, as the job got it: pasted back as one word, its
    controls written out, never sent to the terminal raw."""
    run_dir = materialize("oversubscribed", tmp_path)
    meta_path = run_dir / "run.json"
    meta = json.loads(meta_path.read_text())
    meta["command"] = [*meta["command"], "--tag", "a\nb\x1b[31mred"]
    meta_path.write_text(json.dumps(meta))
    _data, text = report_of(run_dir, width=400)
    (line,) = [x for x in text.splitlines() if "fixes before applying them: trainprof tune" in x]
    assert "\x1b" not in text and line.endswith("--tag $'a\\nb\\x1b[31mred'"), line
