"""`trainprof run` on real torch training loops: steps, --steps, workers, the demo."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import run_trainprof, trainprof_cmd, write_script

from trainprof.analysis.attribution import step_callers
from trainprof.analysis.pipeline import analyze
from trainprof.store.session import Session

WORKERS_JOB = """
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

def main():
    torch.set_num_threads(1)
    data = TensorDataset(torch.randn(2048, 16), torch.randint(0, 4, (2048,)))
    loader = DataLoader(data, batch_size=32, num_workers=2, persistent_workers=True)
    model = nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for x, y in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()

if __name__ == "__main__":
    main()
"""


@pytest.fixture(scope="module")
def workers_run(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("workers")
    script = write_script(tmp, "train_workers.py", WORKERS_JOB)
    return run_trainprof(tmp, str(script), run_args=("--interval", "0.1"))


@pytest.mark.parallel
def test_steps_and_samples_counted(workers_run) -> None:  # type: ignore[no-untyped-def]
    r = workers_run
    assert r.returncode == 0, r.stderr
    s = r.report["summary"]
    assert s["steps"] == 2 * 64
    assert s["samples_per_s"] == pytest.approx(s["steps_per_s"] * 32, rel=0.05)
    assert 0 <= s["data_wait_frac"] <= 1
    assert s["step_time_s"]["p50"] <= s["step_time_s"]["p95"] <= s["step_time_s"]["max"]


@pytest.mark.parallel
def test_dataloader_workers_are_seen_and_measured(workers_run) -> None:  # type: ignore[no-untyped-def]
    session = Session.load(workers_run.run_dir)
    workers = session.workers
    assert sorted(w.header["worker_id"] for w in workers) == [0, 1]
    primary = session.primary
    assert primary is not None
    assert all(w.header["parent_pid"] == primary.pid for w in workers)
    # Workers fetched every batch (64 per epoch), and the sampler saw them as processes.
    assert sum(w.fetch_count for w in workers) == 128
    sampled = set(session.samples.procs)
    assert {w.pid for w in workers} <= sampled
    # trainprof's own processes (the runner, py-spy) are sampled apart from the job's: their
    # CPU is read once a tick has an interval
    own = [v for v in session.samples.self_cpu if v == v]
    assert own and all(v >= 0 for v in own), list(session.samples.self_cpu)
    assert workers_run.report["summary"]["trainprof_cpu_percent_mean"] is not None
    (cfg,) = primary.loaders.values()
    assert cfg["num_workers"] == 2 and cfg["persistent_workers"] is True and cfg["batch_size"] == 32
    assert cfg["sharing_strategy"] == "file_descriptor"
    # persistent workers: two epochs, the first batch of each is recorded
    assert len(primary.epochs) == 2
    # backward() returns are recorded only in a job without an optimizer step and a batch
    assert len(primary.backwards) == 0


TOP_LEVEL_WORKERS_JOB = """
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.set_num_threads(1)
data = TensorDataset(torch.randn(4096, 64), torch.randint(0, 4, (4096,)))
loader = DataLoader(data, batch_size=32, num_workers=2, persistent_workers=True)
model = nn.Sequential(nn.Linear(64, 1024), nn.ReLU(), nn.Linear(1024, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for epoch in range(4):
    for x, y in loader:
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
"""


@pytest.mark.parallel
def test_persistent_workers_of_a_top_level_loop_are_measured(tmp_path: Path) -> None:
    """A loop at the script's top level keeps its loader to the end: its persistent workers
    are killed at the job's exit, before their own last write, so the counts their timer
    wrote are all there is (nothing was recorded before)."""
    script = write_script(tmp_path, "train_top.py", TOP_LEVEL_WORKERS_JOB)
    r = run_trainprof(tmp_path, str(script))
    assert r.returncode == 0, r.stderr
    workers = Session.load(r.run_dir).workers
    assert sorted(w.header["worker_id"] for w in workers) == [0, 1]
    assert sum(w.fetch_count for w in workers) > 0


@pytest.mark.parallel
def test_steps_option_stops_cleanly(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        "forever.py",
        """
        import torch
        model = torch.nn.Linear(8, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        while True:
            opt.zero_grad(); model(torch.randn(4, 8)).sum().backward(); opt.step()
        """,
    )
    r = run_trainprof(tmp_path, str(script), run_args=("--steps", "25"))
    assert r.returncode == 0
    assert r.report["summary"]["steps"] == 25
    assert r.report["run"]["stopped_by"] == "steps"
    assert "stopped cleanly after --steps" in r.stderr


# Endless jobs without a torch optimizer: --steps counts what the report calls their steps.
HAND_WRITTEN_FOREVER = """
import torch
model = torch.nn.Linear(8, 1)
while True:
    model(torch.randn(4, 8)).sum().backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= 0.01 * p.grad
            p.grad = None
"""
LOADER_FOREVER = """
import torch
from torch.utils.data import DataLoader, TensorDataset
model = torch.nn.Linear(8, 1)
loader = DataLoader(TensorDataset(torch.randn(64, 8)), batch_size=4)
while True:
    for (x,) in loader:
        model(x).sum().backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= 0.01 * p.grad
                p.grad = None
"""


@pytest.mark.parallel
@pytest.mark.parametrize(
    ("job", "unit"), [(HAND_WRITTEN_FOREVER, "backward pass"), (LOADER_FOREVER, "batch")]
)
def test_steps_option_stops_a_job_without_optimizer(tmp_path: Path, job: str, unit: str) -> None:
    script = write_script(tmp_path, "no_optimizer.py", job)
    r = run_trainprof(tmp_path, str(script), run_args=("--steps", "25"))
    assert r.returncode == 0, r.stderr
    assert r.report["summary"]["unit"] == unit
    assert r.report["summary"]["steps"] == 25
    assert r.report["run"]["stopped_by"] == "steps"


@pytest.mark.parallel
def test_steps_option_lets_a_statistics_pass_before_the_optimizer_run(tmp_path: Path) -> None:
    """40 batches read for statistics (no backward) before the optimizer is built: --steps 3
    stops after three optimizer steps, not in that pass."""
    script = write_script(
        tmp_path,
        "stats_first.py",
        """
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        loader = DataLoader(TensorDataset(torch.randn(160, 8)), batch_size=4)
        mean = sum(x.mean(0) for (x,) in loader) / len(loader)
        print("statistics done", flush=True)
        model = torch.nn.Linear(8, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        while True:
            for (x,) in loader:
                model(x - mean).sum().backward()
                opt.step()
                opt.zero_grad()
        """,
    )
    r = run_trainprof(tmp_path, str(script), run_args=("--steps", "3"))
    assert r.returncode == 0, r.stderr
    assert "statistics done" in r.stdout
    assert r.report["summary"]["unit"] == "step"
    assert r.report["summary"]["steps"] == 3


@pytest.mark.parallel
def test_steps_option_counts_optimizer_steps_of_an_accumulating_job(tmp_path: Path) -> None:
    """16 micro-batches (and backward passes) before the first optimizer step: with a torch
    optimizer built, --steps 3 means three optimizer steps, not three batches."""
    script = write_script(
        tmp_path,
        "accumulate.py",
        """
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        model = torch.nn.Linear(8, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        loader = DataLoader(TensorDataset(torch.randn(64, 8)), batch_size=1)
        batches = 0
        while True:
            for (x,) in loader:
                model(x).sum().backward()
                batches += 1
                if batches % 16 == 0:
                    opt.step()
                    opt.zero_grad()
                    print("batches", batches, flush=True)
        """,
    )
    r = run_trainprof(tmp_path, str(script), run_args=("--steps", "3"))
    assert r.returncode == 0, r.stderr
    assert r.report["summary"]["unit"] == "step"
    assert r.report["summary"]["steps"] == 3
    assert r.stdout.splitlines() == ["batches 16", "batches 32"]  # the third step stopped it


@pytest.mark.parallel
def test_timeout_stops_the_job(tmp_path: Path) -> None:
    script = write_script(
        tmp_path, "sleepy.py", "import time\nprint('up', flush=True)\ntime.sleep(600)\n"
    )
    r = run_trainprof(tmp_path, str(script), run_args=("--timeout", "1.5"))
    assert r.returncode == 124
    assert r.report["run"]["stopped_by"] == "timeout"


@pytest.mark.parallel
def test_job_without_optimizer_gets_batch_records(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        "infer.py",
        """
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        model = torch.nn.Linear(8, 2)
        loader = DataLoader(TensorDataset(torch.randn(640, 8)), batch_size=16)
        with torch.no_grad():
            for (x,) in loader:
                model(x)
        """,
    )
    r = run_trainprof(tmp_path, str(script))
    assert r.returncode == 0
    assert r.report["summary"]["unit"] == "batch"
    assert r.report["summary"]["steps"] == 40
    assert r.report["summary"]["samples_per_s"] is not None


def test_a_hand_written_loop_is_judged_on_its_backward_passes(tmp_path: Path) -> None:
    """No torch.optim and no DataLoader: each backward() is the step, and the rules judge those
    steps: here a CPU-bound search every 50 steps is named, at its function."""
    script = write_script(
        tmp_path,
        "manual.py",
        """
        import torch
        torch.manual_seed(0)
        torch.set_num_threads(1)
        layer = torch.nn.Linear(512, 512)
        x = torch.randn(4096, 512)

        def refresh_hard_negatives(n):
            return sorted(range(n), key=lambda i: (i * 7919) % 104729)

        for step in range(400):
            loss = layer(x[(step * 256) % 3840:][:256]).square().mean()
            loss.backward()
            with torch.no_grad():
                for p in layer.parameters():
                    p -= 0.001 * p.grad
                    p.grad = None
            if step % 50 == 49:
                refresh_hard_negatives(400_000)
        """,
    )
    r = run_trainprof(tmp_path, str(script))
    assert r.returncode == 0, r.stderr[-2000:]
    summary = r.report["summary"]
    assert (summary["unit"], summary["steps"]) == ("backward pass", 400)
    assert summary["samples_per_s"] is None and summary["data_wait_frac"] is None  # not measured
    assert r.problems and r.problems[0] == "cpu-stall", r.report["findings"]
    assert "refresh_hard_negatives" in (r.report["findings"][0]["where"] or ""), r.report
    words = " ".join(r.stderr.replace("│", " ").split())  # the console box, unwrapped
    assert "400 backward passes (no optimizer step or DataLoader batch seen)" in words, words


@pytest.mark.parallel
def test_report_command_rerenders_a_stored_run(workers_run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "again.json"
    proc = subprocess.run(
        trainprof_cmd("report", str(workers_run.run_dir), "--json", str(out)),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    again = json.loads(out.read_text())
    assert again["summary"] == workers_run.report["summary"]
    assert "trainprof report" in proc.stdout  # no job output to protect: `> report.txt` works


@pytest.mark.parallel
def test_report_of_a_missing_dir_is_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        trainprof_cmd("report", str(tmp_path / "nope")), capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("trainprof: no such run directory")
    # a file (the training script, a --json report) is named as one, not as missing
    script = tmp_path / "train.py"
    script.write_text("print(1)\n")
    proc = subprocess.run(trainprof_cmd("report", str(script)), capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"trainprof: {script} is a file, not a run directory"), (
        proc.stderr
    )


def test_demo_names_fake_batching_and_input_bound(
    demo_run: subprocess.CompletedProcess[str],
) -> None:
    proc = demo_run  # `trainprof demo --run-dir DIR`, shared with test_hardening_cli
    assert proc.returncode == 0, proc.stderr
    report = json.loads((Path(proc.args[-1]) / "report.json").read_text())
    ids = [f["id"] for f in report["findings"]]
    # Both, ranked by the seconds each claims: data loading, and the per-sample passes
    # through the step that batching would save.
    assert set(ids[:2]) == {"fake-batching", "input-bound"}
    assert sum(f["impact"] for f in report["findings"][:2]) <= 1.0
    assert "Fake batching" in proc.stderr
    # 8 single-sample batches a step: the rate a progress bar over the loader shows, too
    assert report["settings"]["batches_per_step"] == 8
    assert re.search(r"it/s \(8 batches each: [\d.]+ batches/s\)", proc.stderr)


@pytest.mark.parallel
def test_demo_list_and_bad_name() -> None:
    listing = subprocess.run(trainprof_cmd("demo", "list"), capture_output=True, text=True)
    assert listing.returncode == 0
    assert "cpu_stall" in listing.stdout and "(cpu-stall)" in listing.stdout
    bad = subprocess.run(trainprof_cmd("demo", "nope"), capture_output=True, text=True)
    assert bad.returncode == 2
    assert bad.stderr.strip() == "trainprof: no demo named 'nope'; `trainprof demo list` shows them"


@pytest.fixture(scope="module")
def cpu_stall_demo(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """`trainprof demo cpu-stall`: the zoo's cpu_stall under `trainprof run`, with py-spy's
    stacks taken in chunks of 2 s (TRAINPROF_STACK_CHUNK_S) so that the hand-over between
    chunks happens in this short job. One run for the demo's test and the chunks' test."""
    run_dir = tmp_path_factory.mktemp("demo-cpu-stall") / "d"
    proc = subprocess.run(
        trainprof_cmd("demo", "cpu-stall", "--run-dir", str(run_dir)),
        capture_output=True,
        text=True,
        timeout=120,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("TRAINPROF_")},
            "TRAINPROF_STACK_CHUNK_S": "2",
        },
    )
    return proc, run_dir


def test_demo_by_finding_id(cpu_stall_demo: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    proc, run_dir = cpu_stall_demo
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads((run_dir / "report.json").read_text())
    assert report["findings"][0]["id"] == "cpu-stall"


def test_stack_sampling_hands_over_between_chunks(
    cpu_stall_demo: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    proc, run_dir = cpu_stall_demo
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "running cpu_stall.py under `trainprof run`" in proc.stderr  # the zoo's script
    chunks = json.loads((run_dir / "run.json").read_text())["stacks"]["chunks"]
    assert len(chunks) >= 2
    spans = Session.load(run_dir).spans
    later = float(chunks[1]["started_at"])
    assert any(s.t0 < later for s in spans) and any(s.t0 > later for s in spans)
    assert json.loads((run_dir / "report.json").read_text())["findings"][0]["id"] == "cpu-stall"
    # each finished chunk is kept gzipped, under the name run.json gives it
    assert all(c["file"].endswith(".json.gz") for c in chunks), chunks
    assert not list(run_dir.glob("stacks-*.json")) and not list(run_dir.glob("*.part"))


@pytest.mark.parallel
def test_the_probe_records_where_the_model_trains(workers_run) -> None:  # type: ignore[no-untyped-def]
    """What gpu-unused reads, from a real CPU job: the parameters' device, the CUDA version this
    torch was built for (None: the CPU wheel here) and CUDA_VISIBLE_DEVICES (unset: None)."""
    primary = Session.load(workers_run.run_dir).primary
    assert primary is not None
    precision = next(i["precision"] for i in primary.infos if "precision" in i)
    assert precision["device"] == "cpu"
    assert "cuda_build" in precision and precision["cuda_build"] is None
    assert "cuda_visible_devices" in precision


@pytest.mark.parallel
def test_the_probe_records_the_loop_that_steps_the_optimizer(workers_run) -> None:  # type: ignore[no-untyped-def]
    """The loop's functions as a fact (attribution.step_callers), read from a real job's first
    optimizer step: main and the module, the user's frames; torch's hook wrapper is not."""
    primary = Session.load(workers_run.run_dir).primary
    assert primary is not None
    callers = step_callers(primary.infos)
    script = str(workers_run.run_dir.parent / "train_workers.py")
    assert {(f, Path(p).resolve()) for f, p in callers} == {
        ("main", Path(script).resolve()),
        ("<module>", Path(script).resolve()),
    }


TRAINS_IN_A_CHILD = """
    # The script trains in a multiprocessing child; its own process only waits in join().
    import multiprocessing as mp
    import time


    def train():
        import torch

        torch.set_num_threads(1)
        model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x, y = torch.randn(64, 64), torch.randint(0, 10, (64,))
        end = time.monotonic() + 3.0
        while time.monotonic() < end:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()


    if __name__ == "__main__":
        p = mp.get_context("spawn").Process(target=train)
        p.start()
        p.join()
"""


def test_a_script_that_trains_in_a_child_process_is_sampled_in_that_child(tmp_path: Path) -> None:
    """py-spy starts on the script's own process, which only waits for its child: it follows
    the child once the child steps (the report said "main thread idle 94%" of the steps)."""
    script = write_script(tmp_path, "child_train.py", TRAINS_IN_A_CHILD)
    r = run_trainprof(tmp_path, str(script), timeout=120)
    assert r.returncode == 0 and r.report is not None, r.stderr[-3000:]
    meta = json.loads((r.run_dir / "run.json").read_text())
    trainer = [p.name for p in r.run_dir.glob("events-*.tp") if str(meta["pid"]) not in p.name]
    assert meta["stacks"]["pid"] != meta["pid"], meta["stacks"]
    assert f"events-{meta['stacks']['pid']}.tp" in trainer, (trainer, meta["stacks"])
    ledger = r.report["ledger"]
    assert ledger["step_split"] == "stack samples", ledger
    assert "idle" not in ledger["buckets"] or ledger["buckets"]["idle"]["share"] < 0.2, ledger


QUICK_STEPS = """
    import torch


    def train():
        torch.set_num_threads(1)
        model = torch.nn.Linear(8, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y = torch.randn(4, 8), torch.randint(0, 2, (4,))
        for _ in range(200):  # well under the writer's half-second tick and 256-record batch
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
"""

LEAVES_THROUGH_OS_EXIT = {
    "a forked multiprocessing child": """
    if __name__ == "__main__":
        import multiprocessing as mp

        p = mp.get_context("fork").Process(target=train)  # its end is os._exit(exitcode)
        p.start()
        p.join()
""",
    "a script that ends on os._exit": """
    if __name__ == "__main__":
        import os

        train()
        os._exit(0)
""",
}


@pytest.mark.parallel
@pytest.mark.parametrize("how", list(LEAVES_THROUGH_OS_EXIT))
def test_a_process_that_leaves_through_os_exit_keeps_its_last_steps(
    tmp_path: Path, how: str
) -> None:
    """``os._exit`` skips the exit handlers, the probe's final flush among them: the steps
    queued since the writer's last tick were lost (a forked trainer's report counted 205 of
    384 steps, these 200 quick ones none)."""
    script = write_script(tmp_path, "exits.py", QUICK_STEPS + LEAVES_THROUGH_OS_EXIT[how])
    r = run_trainprof(tmp_path, "--no-stacks", str(script), timeout=120)
    assert r.returncode == 0 and r.report is not None, r.stderr[-3000:]
    assert r.report["summary"]["steps"] == 200, r.report["summary"]


STREAMS = """
    import torch
    from torch.utils.data import DataLoader, IterableDataset


    class Stream(IterableDataset):
        def __iter__(self):
            for i in range(640):
                yield torch.randn(8), i % 2


    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in DataLoader(Stream(), batch_size=32):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
"""


@pytest.mark.parallel
def test_an_iterable_dataset_is_recorded_with_its_iter(tmp_path: Path) -> None:
    """The probe tells the report where an IterableDataset's samples are made: its __iter__
    (the loader's config pointed at torch's Dataset.__getitem__, which it never calls)."""
    script = write_script(tmp_path, "stream.py", STREAMS)
    r = run_trainprof(tmp_path, str(script))
    assert r.returncode == 0, r.stderr[-3000:]
    session = Session.load(r.run_dir)
    assert session.primary is not None
    config = session.primary.loaders[0]
    assert config["iterable"] is True, config
    assert config["getitem_at"][0] == str(script) and config["getitem_at"][2] == "Stream.__iter__"


RANDOM_STREAM = """
    import torch
    from torch.utils.data import DataLoader, IterableDataset


    class Synthetic(IterableDataset):
        # random samples, never split by worker: each worker draws its own (torch seeds each
        # worker apart), so nothing is duplicated
        def __iter__(self):
            for _ in range(1024):
                yield torch.randn(64), torch.randint(0, 10, ())


    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(64, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Synthetic(), batch_size=64, num_workers=2, persistent_workers=True)
    for epoch in range(6):
        for x, y in loader:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
"""


@pytest.mark.parallel
def test_an_unsplit_random_stream_is_not_called_duplicated(tmp_path: Path) -> None:
    """iterable-unsplit needs proof in the run (two workers with the same first batch): a
    random stream's workers draw different samples, and it stays quiet, though none of them
    calls get_worker_info()."""
    script = write_script(tmp_path, "synthetic.py", RANDOM_STREAM)
    r = run_trainprof(tmp_path, str(script))
    assert r.returncode == 0 and r.report is not None, r.stderr[-3000:]
    assert "iterable-unsplit" not in r.problems, r.problems
    m = analyze(Session.load(r.run_dir))[0]
    assert m.workers_asked_info is False and m.streams_data
    firsts = dict(m.workers_first_batches)
    assert sorted(firsts) == [0, 1] and firsts[0] != firsts[1], m.workers_first_batches


NEW_LOADER_EACH_EPOCH = """
import sys
import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

data = TensorDataset(torch.randn(512, 8))
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for epoch in range(3):  # a sampler and a loader built anew each epoch (no process group needed)
    sampler = DistributedSampler(data, num_replicas=1, rank=0, shuffle=True)
    if sys.argv[1] == "set":
        sampler.set_epoch(epoch)
    for (x,) in DataLoader(data, batch_size=16, sampler=sampler):
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
"""


@pytest.mark.parallel
def test_a_sampler_built_anew_each_epoch_at_epoch_0_is_named(tmp_path: Path) -> None:
    """Three loaders over one dataset, each sampler at epoch 0: the same order three times.
    The same loop calling set_epoch(epoch) on each new sampler is left alone."""
    script = str(write_script(tmp_path, "new_loaders.py", NEW_LOADER_EACH_EPOCH))
    r = run_trainprof(tmp_path, script, "unset")
    (f,) = [f for f in r.report["findings"] if f["id"] == "sampler-set-epoch"]
    assert "(3 passes over the data, all at epoch 0)" in f["title"], f["title"]
    fixed = run_trainprof(tmp_path, script, "set")
    assert fixed.returncode == 0, fixed.stderr[-2000:]
    assert "sampler-set-epoch" not in fixed.finding_ids, fixed.finding_ids
