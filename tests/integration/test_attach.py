"""`trainprof attach PID` on unmodified zoo scripts started in the background: the finding,
its `where` and the shares come from py-spy's stacks alone; the iteration rate it estimates
agrees with what `trainprof run` measures; the target is not slowed down."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
from conftest import as_a_terminal_job, assert_rules_ran, repeated, trainprof_cmd
from test_hardening_cli import SCHEMA_PATH, check

from trainprof.examples.zoo import ZOO_DIR

DURATION = "3"  # 50 Hz stacks: ~150 samples a process, the verdicts' evidence
# the verdicts on the job's CPU use and run-queue wait (cpu-starved, or its absence), which a
# neighbour's load sways over a short window
CPU_DURATION = "4"
# a window the hang verdict judges (its attach_still, 5 s), with a margin for py-spy's start
STILL_ENOUGH = "7"


@dataclass
class Target:
    proc: subprocess.Popen[str]
    lines: list[tuple[float, str]] = field(default_factory=list)


@contextmanager
def started(
    args: list[str],
    ready: str,
    cwd: Path,
    timeout: float = 90,
    env: dict[str, str] | None = None,
    stderr_too: bool = False,
) -> Iterator[Target]:
    """The job in the background (``env`` added to ours); yields once it printed a line
    containing ``ready`` (on its stdout, or on its stderr too with ``stderr_too``)."""
    proc = subprocess.Popen(
        args,
        cwd=cwd,
        env={**os.environ, **env} if env else None,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if stderr_too else subprocess.DEVNULL,
        text=True,
        preexec_fn=as_a_terminal_job,
    )
    t = Target(proc)
    seen = threading.Event()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            t.lines.append((time.monotonic(), line))
            if ready in line:
                seen.set()

    threading.Thread(target=pump, daemon=True).start()
    try:
        assert seen.wait(timeout), f"the job never printed {ready!r}"
        yield t
    finally:
        try:
            tree = [*psutil.Process(proc.pid).children(recursive=True), psutil.Process(proc.pid)]
        except psutil.Error:
            tree = []  # it ended by itself
        for p in tree:
            try:
                p.kill()
            except psutil.Error:
                pass
        proc.wait()


@dataclass
class Attached:
    returncode: int
    stderr: str
    run_dir: Path
    report: dict[str, Any]

    @property
    def problems(self) -> list[dict[str, Any]]:
        return [f for f in self.report["findings"] if f["severity"] != "info"]

    @property
    def info(self) -> dict[str, Any]:
        return self.report["run"]["attach"]


def attach(pid: int, tmp: Path, *extra: str, duration: str = DURATION) -> Attached:
    run_dir = tmp / f"attach{len(list(tmp.glob('attach*')))}"
    json_path = run_dir.with_suffix(".json")
    done = subprocess.run(
        trainprof_cmd(
            "attach",
            str(pid),
            "--duration",
            duration,
            "--quiet",
            "--run-dir",
            str(run_dir),
            "--json",
            str(json_path),
            *extra,
        ),  # fmt: skip
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(json_path.read_text())
    return Attached(done.returncode, done.stderr, run_dir, report)


def flat(console: str) -> str:
    """The console report as one line of words (boxes and wrapping removed)."""
    return " ".join(re.sub("[│╭╮╰╯─]", " ", console).split())


def zoo_job(name: str) -> list[str]:
    return repeated(ZOO_DIR / f"{name}.py")


def line_of(name: str, pattern: str) -> int:
    text = (ZOO_DIR / f"{name}.py").read_text().splitlines()
    return next(i for i, line in enumerate(text, 1) if re.search(pattern, line))


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("attach")


@pytest.fixture(scope="module")
def cpu_stall(tmp: Path) -> Attached:
    with started(zoo_job("cpu_stall"), "step ", tmp) as job:
        return attach(job.proc.pid, tmp)


def test_cpu_stall_names_the_function_its_line_and_the_period(cpu_stall: Attached) -> None:
    first = cpu_stall.problems[0]
    assert first["id"] == "cpu-stall", cpu_stall.report["findings"]
    call = line_of("cpu_stall", r"^\s+refresh_pseudo_labels\(model")
    assert first["where"] == f"{ZOO_DIR / 'cpu_stall.py'}:{call} (main → refresh_pseudo_labels())"
    hot = first["hotspot"]
    assert hot.startswith(f"{ZOO_DIR / 'cpu_stall.py'}:") and "optimal_sequence_search" in hot
    assert re.search(r"Training stalls every (~\d+ steps|[\d.]+ s) on CPU work", first["title"])
    assert cpu_stall.info["stall_period_s"] is not None


def test_the_attach_report_holds_the_contract(cpu_stall: Attached) -> None:
    schema = json.loads(SCHEMA_PATH.read_text())
    assert check(cpu_stall.report, schema, schema) == []
    assert cpu_stall.report["summary"]["steps"] is None  # attach counts no steps
    skipped = {s["id"]: s["reason"] for s in cpu_stall.report["skipped"]}
    assert "needs `trainprof run`" in skipped["recompiles"]
    assert "`trainprof run`" in skipped["fake-batching"]


def test_report_re_renders_an_attach_run(cpu_stall: Attached, tmp: Path) -> None:
    again = tmp / "again.json"
    done = subprocess.run(
        trainprof_cmd("report", str(cpu_stall.run_dir), "--json", str(again)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "attached to" in done.stdout and "cpu-stall" in done.stdout
    data = json.loads(again.read_text())
    assert [f["id"] for f in data["findings"]] == [f["id"] for f in cpu_stall.report["findings"]]


def test_input_bound_is_first_and_shows_the_data_share(tmp: Path) -> None:
    with started(zoo_job("input_bound"), "epoch 0", tmp) as job:
        r = attach(job.proc.pid, tmp)
    first = r.problems[0]
    assert first["id"] == "input-bound", r.report["findings"]
    assert r.info["shares"]["data"] >= 0.2
    getitem = line_of("input_bound", r"def __getitem__")
    # what `trainprof run` names: the dataset's __getitem__, at its def line
    assert (
        first["where"] == f"{ZOO_DIR / 'input_bound.py'}:{getitem} (ImageFolderDataset.__getitem__)"
    )


def test_per_step_logging_is_named_from_its_stacks(tmp: Path) -> None:
    """The zoo's logging job (3 ms steps, faster than the samples): its printing is named at the
    loop's line, and the gaps its fast loop leaves between backward samples are no stalls (a
    tenth of them were once called CPU stalls, a quarter of the time)."""
    with started(zoo_job("logging_overhead"), "[Epoch 0", tmp) as job:
        r = attach(job.proc.pid, tmp)
    first = r.problems[0]
    assert first["id"] == "logging-overhead", r.report["findings"]
    assert first["where"].startswith(f"{ZOO_DIR / 'logging_overhead.py'}:"), first["where"]
    assert "attach does not see the job's output" in first["evidence"][1]
    stalls = r.report["ledger"]["buckets"].get("stall_compute", {"share": 0.0})
    assert stalls["share"] < 0.05, r.report["ledger"]


def test_a_samplers_work_is_named_at_its_line_not_called_input_bound(tmp: Path) -> None:
    with started(zoo_job("sampler_overhead"), "epoch 0", tmp) as job:
        r = attach(job.proc.pid, tmp)
    first = r.problems[0]
    assert first["id"] == "sampler-overhead", r.report["findings"]
    assert first["where"].startswith(f"{ZOO_DIR / 'sampler_overhead.py'}:"), first["where"]


def test_loop_overhead_is_named_from_its_stacks(tmp: Path) -> None:
    with started(zoo_job("loop_overhead"), "epoch 0", tmp) as job:
        r = attach(job.proc.pid, tmp)
    first = r.problems[0]
    assert first["id"] == "loop-overhead", r.report["findings"]
    assert "TrainingMonitor" in first["where"], first["where"]


def test_waiting_on_the_hand_over_from_workers_is_told_apart(tmp: Path) -> None:
    with started(zoo_job("worker_transfer"), "epoch 0", tmp) as job:
        r = attach(job.proc.pid, tmp)
    first = r.problems[0]
    assert first["id"] == "input-bound", r.report["findings"]
    assert any("receiving batches from workers" in e for e in first["evidence"]), first
    assert first["fix"][0].startswith("fewer, larger tensors per batch"), first["fix"]
    assert not any("more workers" in f for f in first["fix"])
    loop = line_of("worker_transfer", r"for batch in loader")
    assert first["where"] == f"{ZOO_DIR / 'worker_transfer.py'}:{loop} (main)"


def test_from_outside_a_worker_busy_all_the_time_is_the_limit(tmp: Path) -> None:
    """slow_worker's one worker is busy making batches nearly all the time, and the main thread
    waits for them, most often inside receiving them (a clean-clone run sampled it mostly
    waiting on the worker): the worker is the limit (more workers), not the hand-over (which
    `trainprof run` also says, from the probe's batch times)."""
    with started(zoo_job("slow_worker"), "epoch 0", tmp) as job:
        r = attach(job.proc.pid, tmp)
    first = r.problems[0]
    assert first["id"] == "input-bound", r.report["findings"]
    assert any("they are the limit" in e for e in first["evidence"]), first["evidence"]
    assert not any("rather than computes" in e for e in first["evidence"]), first["evidence"]
    assert first["fix"][0].startswith("more workers"), first["fix"]
    assert first["where"].endswith("(HashedTrigrams.__getitem__)"), first["where"]


def test_from_outside_workers_that_wait_are_told_apart_from_workers_that_compute(
    tmp: Path,
) -> None:
    """waiting_worker's workers are as busy as slow_worker's, at a few % of a CPU (the host
    sampler's reading of each): more workers beyond the CPUs, or threads, not a cheaper
    __getitem__."""
    # past the first steps: attached at step 0, one run of four read the main process's first
    # allocations (341 → 400 MiB in the 3 s window) as memory growth
    # sampled long enough for the hang verdict (attach_still): these workers wait most of the
    # time and use next to no CPU, as hung ones do, but their stacks move (a control for it)
    with started(zoo_job("waiting_worker"), "step 40", tmp) as job:
        r = attach(job.proc.pid, tmp, duration=STILL_ENOUGH)
    first = r.problems[0]
    assert first["id"] == "input-bound", r.report["findings"]
    assert any("rather than computes" in e for e in first["evidence"]), first["evidence"]
    assert first["fix"][0].startswith("more workers, beyond the"), first["fix"]
    assert not any("make __getitem__ cheaper" in f for f in first["fix"]), first["fix"]


@pytest.mark.parallel  # judges no timing or load (CONTRIBUTING)
def test_a_job_hung_on_its_workers_is_called_hung_where_they_wait(tmp: Path) -> None:
    """hang_worker_blocked's two workers wait forever for a shard that never comes, and the
    main process for their batch: every stack held, nothing read or written. attach says it is
    hung at the workers' line, not input-bound (more workers would wait as well)."""
    with started(zoo_job("hang_worker_blocked"), "step 20", tmp, stderr_too=True) as job:
        r = attach(job.proc.pid, tmp, duration=STILL_ENOUGH)
    first = r.report["findings"][0]
    assert first["id"] == "hang" and first["severity"] == "error", r.report["findings"]
    assert first["title"].startswith("The job looks hung: nothing moved in the "), first["title"]
    assert "2 DataLoader workers alive but blocked in user code (__getitem__)" in first["title"]
    wait = line_of("hang_worker_blocked", r"self._ready\[shard\].wait\(\)")
    where = f"{ZOO_DIR / 'hang_worker_blocked.py'}:{wait} (StreamingShards.__getitem__)"
    assert first["where"] == where, first["where"]
    assert sum("blocked in wait(), called from" in e for e in first["evidence"]) == 2, first
    assert not [f for f in r.report["findings"] if f["id"] == "input-bound"], r.report["findings"]


def test_checkpoint_shows_torch_save_time(tmp: Path) -> None:
    with started(zoo_job("checkpoint_stall"), "checkpoint saved", tmp) as job:
        r = attach(job.proc.pid, tmp)
    assert r.info["shares"]["save"] > 0.03
    first = r.problems[0]
    assert first["id"] == "checkpoint-stall", r.report["findings"]
    assert re.search(
        r"checkpoint saves \(torch.save, safetensors\) held the main thread [\d.]+ s",
        first["evidence"][0],
    )
    assert first["where"].startswith(f"{ZOO_DIR / 'checkpoint_stall.py'}:")


def test_short_validations_under_no_grad_are_evaluations(tmp: Path) -> None:
    """eval_no_grad validates for ~0.15 s every 20 steps under torch.no_grad(), called from
    its own line in the loop: each one is an evaluation. attach cannot see model.eval(), so it
    neither claims its absence nor advises calling it."""
    with started(zoo_job("eval_no_grad"), "val ppl", tmp) as job:
        r = attach(job.proc.pid, tmp)
    first = r.problems[0]
    assert first["id"] == "eval-stall", r.report["findings"]
    assert "model.eval() cannot be seen from outside" in first["evidence"][0]
    assert not any("model.eval()" in f for f in first["fix"]), first["fix"]
    assert "every 1 steps" not in first["evidence"][0]
    call = line_of("eval_no_grad", r"total \+= criterion\(model\(vx\)")
    assert first["where"] == f"{ZOO_DIR / 'eval_no_grad.py'}:{call} (fit)", first["where"]


def test_a_healthy_job_gets_no_warning_through_its_worker(tmp: Path) -> None:
    """Given a DataLoader worker's PID, attach says so and samples the training process."""
    with started(zoo_job("healthy_loader"), "epoch 0", tmp) as job:
        deadline = time.monotonic() + 30
        while not (workers := psutil.Process(job.proc.pid).children()):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        r = attach(workers[0].pid, tmp, duration=CPU_DURATION)
    assert f"is a DataLoader worker of pid {job.proc.pid}" in r.stderr
    assert r.info["pid"] == job.proc.pid and r.info["workers"] >= 1
    assert r.problems == [], r.report["findings"]
    assert_rules_ran(r.report)
    assert r.info["shares"]["forward"] + r.info["shares"]["backward"] > 0.5


def test_from_outside_torch_threads_beyond_the_cpus_starve_the_loop(tmp: Path) -> None:
    """The zoo's oversubscribed job (4x as many intra-op threads as CPUs), attached: the main
    thread's run-queue wait and the job's CPU use say it, without the probe's thread count."""
    job = zoo_job("oversubscribed")
    with started(job, "step 0", tmp, env={"ZOO_STEPS": "100000"}) as t:
        r = attach(t.proc.pid, tmp, duration=CPU_DURATION)
    first = r.problems[0]
    assert first["id"] == "cpu-starved", r.report["findings"]
    assert "CPUs it may use: its threads compete for them" in first["evidence"][1]
    assert first["fix"][0].startswith("size torch's threads to the"), first["fix"]


# attach's timing claims (its it/s within 15 % of the count `trainprof run` makes; attaching
# keeps 90 % of the job's rate) are figures of `python -m bench.attach_timing`, not tests here:
# on a shared machine they held only as retried tests.


def test_a_torchrun_job_is_reported_per_rank(tmp: Path) -> None:
    """Attached through torchrun's PID: both ranks are found (by their RANK) and sampled."""
    torchrun = str(Path(sys.executable).parent / "torchrun")
    job = [torchrun, "--nproc-per-node", "2", str(ZOO_DIR / "attach_dist.py"), "--seconds", "25"]
    with started(job, "training", tmp) as t:
        deadline = time.monotonic() + 60
        while sum(line.count("training") for _w, line in t.lines) < 2:  # both ranks train
            assert time.monotonic() < deadline, t.lines
            time.sleep(0.1)
        r = attach(t.proc.pid, tmp)
    assert "is a launcher: attaching to the Python training processes under it" in r.stderr
    ranks = r.info["ranks"]
    assert [x["rank"] for x in ranks] == [0, 1]
    assert r.info["pid"] == ranks[0]["pid"] and r.info["given_pid"] == t.proc.pid
    for x in ranks:
        assert x["sampled_s"] > 2 and x["shares"]["backward"] > 0.1
        assert x["iterations"]["steps_per_s"] is not None or x["iterations"]["reason"]
    assert "rank 1 pid" in flat(r.stderr)  # the console shows a row per rank


@pytest.mark.parallel  # judges no timing or load (CONTRIBUTING)
def test_the_target_exiting_while_sampled_gives_a_report_of_what_was_seen(tmp: Path) -> None:
    job = [sys.executable, str(ZOO_DIR / "attach_paced.py"), "--rate", "20", "--seconds", "2.5"]
    with started(job, "training", tmp) as t:
        started_at = time.monotonic()
        r = attach(t.proc.pid, tmp, "--duration", "30")
        assert time.monotonic() - started_at < 20  # it did not wait out the 30 s
    assert r.returncode == 0
    assert r.info["target_exit"].startswith("exited during sampling, after")
    assert r.info["py_spy_restarts"] == 0  # not started again on a job that ends
    assert "the target exited during sampling" in flat(r.stderr)
    assert r.info["sampled_s"] > 0.5


def _py_spy_of(pid: int, segment: int = 0) -> psutil.Process | None:
    """The py-spy recording (``segment`` or a later one, by the trace it writes:
    ``py-spy-raw-PID.json``, then ``py-spy-raw-PID-N.json``) that a `trainprof attach` process
    runs now; not another py-spy child, nor an exited one not yet reaped."""
    try:
        kids = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return None
    for kid in kids:
        try:
            if kid.name() != "py-spy" or kid.status() == psutil.STATUS_ZOMBIE:
                continue
            out = next((a for a in kid.cmdline() if "py-spy-raw-" in a), None)
        except psutil.Error:
            continue
        found = re.search(r"py-spy-raw-\d+(?:-(\d+))?\.json$", out or "")
        if found and int(found[1] or 0) >= segment:
            return kid
    return None


@pytest.mark.parallel  # judges no timing or load (CONTRIBUTING)
def test_py_spy_stopping_by_itself_is_started_again_and_ctrl_c_reports(tmp: Path) -> None:
    """py-spy may stop by itself on a live job (seen: after 15 samples, at an epoch's end):
    attach starts it again for the time left and joins the stacks. Stopped here as py-spy stops
    by itself, writing what it has (SIGINT to py-spy alone), then Ctrl-C to attach."""
    job = [sys.executable, str(ZOO_DIR / "attach_paced.py"), "--rate", "20", "--seconds", "30"]
    with started(job, "training", tmp) as t:
        run_dir = tmp / "interrupted"
        json_path = tmp / "interrupted.json"
        proc = subprocess.Popen(
            trainprof_cmd(
                *("attach", str(t.proc.pid), "--duration", "60"),
                *("--run-dir", str(run_dir), "--json", str(json_path)),
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=as_a_terminal_job,
        )
        deadline = time.monotonic() + 60
        while (first := _py_spy_of(proc.pid)) is None:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.1)
        time.sleep(2)  # let it sample a while
        with contextlib.suppress(psutil.NoSuchProcess):  # (or it stopped by itself already)
            first.send_signal(signal.SIGINT)
            first.wait(30)
        stopped = time.monotonic()
        while _py_spy_of(proc.pid, segment=1) is None:
            assert time.monotonic() < deadline and proc.poll() is None, "py-spy not started again"
            time.sleep(0.1)
        time.sleep(2.5)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
        assert t.proc.poll() is None  # the job goes on
    assert proc.returncode == 0, err[-2000:]
    assert "interrupted (Ctrl-C)" in flat(err) and "report again: trainprof report" in err
    # (py-spy may also stop by itself on this job, before or after it is stopped here: seen)
    restarts = json.loads(json_path.read_text())["run"]["attach"]["py_spy_restarts"]
    log = run_dir / "py-spy.log"
    assert restarts >= 1, (err[-2000:], log.read_text()[-2000:] if log.exists() else None)
    said = f"started again ({restarts} time{'s' if restarts > 1 else ''}): the stacks have gaps"
    assert "py-spy stopped by itself on the live job and was" in flat(err) and said in flat(err)
    assert not list(run_dir.glob("py-spy-raw-*"))  # joined into one trace a process, then removed
    from trainprof.store.stacks import load_spans

    meta = json.loads((run_dir / "run.json").read_text())
    chunk = meta["stacks"]["chunks"][0]
    spans = load_spans(run_dir / chunk["file"], chunk["started_at"])
    # stacks from both recordings, on one clock
    assert spans[0].t0 < stopped - 1.0 and spans[-1].t1 > stopped + 1.5, (spans[0], spans[-1])


SPAWNED_RANKS = """
import os, sys, time
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(rank, port):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(32, 32))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    print("training", flush=True)
    end = time.monotonic() + 30
    while time.monotonic() < end:
        opt.zero_grad()
        model(torch.randn(16, 32)).sum().backward()
        opt.step()


if __name__ == "__main__":
    mp.spawn(rank_main, args=(int(sys.argv[1]),), nprocs=2)
"""


@pytest.mark.parallel
def test_a_script_that_spawns_its_ranks_is_a_launcher(tmp: Path) -> None:
    """The DDP tutorial's torch.multiprocessing.spawn: the PID a user sees is the script's, which
    only waits; its children (command lines like DataLoader workers') are the ranks. Attach said
    "main thread idle 100%", "3 DataLoader worker processes", "No problems found"."""
    from trainprof.collect.attach.runner import _dump
    from trainprof.collect.attach.target import resolve

    script = tmp / "spawned_ranks.py"
    script.write_text(SPAWNED_RANKS)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with started([sys.executable, str(script), str(port)], "training", tmp) as t:
        deadline = time.monotonic() + 60
        while sum(line.count("training") for _w, line in t.lines) < 2:  # both ranks train
            assert time.monotonic() < deadline, t.lines
            time.sleep(0.1)
        targets = resolve(t.proc.pid, dump=_dump)
        children = {c.pid for c in psutil.Process(t.proc.pid).children()}
    assert targets.note is not None and "is a launcher" in targets.note, targets
    assert len(targets.processes) == 2 and {p.pid for p in targets.processes} <= children


DEEP_MODEL_FORKED_WORKERS = """
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.set_num_threads(1)


def nested(depth):
    return nn.Linear(32, 32) if depth == 0 else nn.Sequential(nested(depth - 1), nn.ReLU())


model = nn.Sequential(nested(40), nn.Linear(32, 2))  # a forward ~130 frames deep
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = TensorDataset(torch.randn(512, 32), torch.randint(0, 2, (512,)))
loader = DataLoader(data, batch_size=16, num_workers=2)  # forked workers, shallower stacks
for epoch in range(10_000):
    for x, y in loader:
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    print(f"epoch {epoch}", flush=True)
"""


def test_forked_workers_stacks_stay_out_of_the_jobs_stacks(tmp: Path) -> None:
    """py-spy writes a thread's stacks as differences from the last stack of its thread id,
    which a forked worker's main thread shares with the job's: read as written, half the
    job's stacks had worker frames piled under them (up to 300 frames deep), and an evaluation
    in a Hugging Face job went unseen. Its workers, restarted each epoch, had the report say
    "47 DataLoader worker processes seen" and advise more workers."""
    from trainprof.store.stacks import load_spans

    script = tmp / "deep_model.py"
    script.write_text(DEEP_MODEL_FORKED_WORKERS)
    with started([sys.executable, str(script)], "epoch 0", tmp) as job:
        r = attach(job.proc.pid, tmp)
    spans = load_spans(r.run_dir / f"stacks-{job.proc.pid}.json.gz", 0.0)
    total = sum(s.t1 - s.t0 for s in spans)
    rooted = sum(s.t1 - s.t0 for s in spans if [f[0] for f in s.frames].count("<module>") == 1)
    # (py-spy --nonblocking tears a few stacks itself: they lack the root, never add one)
    assert total > 1.0 and rooted / total > 0.9, (rooted, total)
    assert not any(f[0] == "_worker_loop" for s in spans for f in s.frames)
    # its workers, started again each epoch, are told as such, and so is the fix
    assert r.info["workers_at_once"] <= 2 < r.info["workers"], r.info
    first = r.problems[0]
    assert first["id"] == "input-bound", r.report["findings"]
    assert any("workers are started again and again" in e for e in first["evidence"]), first[
        "evidence"
    ]
    assert first["fix"][0].startswith("DataLoader(..., persistent_workers=True)"), first["fix"]
