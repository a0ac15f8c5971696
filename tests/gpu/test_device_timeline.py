"""The device timeline against ground truth, on a real GPU; skipped where CUDA is missing.

1. A training script times its own forward, backward and optimizer step with CUDA events on
   every step (synchronizing only at the end) and prints every step's times. Each step that
   trainprof timed must match the job's own times for that step (within 5 % or 50 µs: the same
   stream, the same boundaries; one step in five may miss that by a host pause, see
   ``assert_steps_match``), and trainprof's means (``device.device_s``, about one step in
   16, steady window) must agree with the job's means over all its steps within 20 %, 0.2 ms
   or three standard errors of a sample that size. The loader restarts every 8 steps, so a
   sampling stride that divides by 8 would always miss (or always hit) the restart's gap.
   The same boundaries: where the GPU has caught up with the host, an event's time is the
   host's instant of its record, so an event one Python call away from the probe's mark is
   that call's time away on the device too. The first H200 run recorded the job's events in
   its loop (before ``loss.backward()``, around its own fetch helper): 60–90 µs per
   micro-batch from the probe's marks there (20 µs on this 2-core machine, with the host
   clock standing in for the device's), over the 5 % / 50 µs a step. So the job wraps the
   very calls the probe wraps, outside the probe's wrappers (the DataLoader iterator's
   ``__next__``, ``torch.autograd.backward``) and hooks its optimizer's own step (its hooks
   run just after the probe's pre-hook and just before its post-hook); its events are made
   before the loop (a first record creates the event: 6.5 µs there, against 2 µs).
2. The probe adds no synchronization: a GPU-bound loop of ~10 ms steps whose host runs well
   ahead of the GPU runs plain and under trainprof, interleaved A B B A, each run timing
   itself with CUDA events; under trainprof it must keep at least 90 % of the plain rate. (A
   sync per step would leave the GPU idle while the host fetches the next batch and launches
   the step, ~2.5 ms on the H200 machine's host: a ~20 % loss. The first version, ~2.4 ms
   steps, was host-bound there and skipped itself.) The ratio is a measurement: it is printed and, with
   ``GPU_CHECK_MEASUREMENTS`` set, appended there as a JSON line for the session's summary.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import run_trainprof, write_script
from gpu_helpers import cuda_available, gpu_env, keep

from trainprof.store.session import Session

PARTS = ("forward", "backward", "optimizer", "idle_between_steps")
REL_TOL = 0.20
ABS_TOL_S = 0.2e-3
MIN_RATIO = 0.90


pytestmark = pytest.mark.skipif(not cuda_available(), reason="no CUDA device")


def measured(record: dict[str, Any]) -> None:
    print(json.dumps(record))
    path = os.environ.get("GPU_CHECK_MEASUREMENTS")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(record) + "\n")


def tagged(text: str, tag: str) -> dict[str, Any]:
    for line in reversed(text.splitlines()):
        if line.startswith(tag + " "):
            return json.loads(line[len(tag) + 1 :])
    raise AssertionError(f"no {tag} line in the job's output:\n{text[-2000:]}")


BOUNDARIES = '''
from torch.utils.data import dataloader as _dataloader


class Boundaries:
    """The job's own CUDA events at the probe's step boundaries, each recorded one call away
    from the probe's: around the DataLoader iterator's ``__next__`` and
    ``torch.autograd.backward`` (wrapping the probe's wrappers) and in the optimizer's own step
    hooks. Per step, ``(phase, event)`` in order: an interval counts for the phase of the mark
    that opens it, like the probe's, and a step's last one (its end to the next step's first
    batch) is its gap. A fetch inside a step (a later micro-batch) opens ``data``."""

    def __init__(self, dev, n, opt):
        self.stream = torch.cuda.current_stream(dev)
        self.ready = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        for e in self.ready:  # a first record creates the event: not in the timed loop
            e.record(self.stream)
        torch.cuda.synchronize()
        self.spans, self.steps = [], []
        inner_next = _dataloader._BaseDataLoaderIter.__next__
        inner_backward = torch.autograd.backward

        def timed_next(it):
            if self.spans:
                self.mark("data")
            batch = inner_next(it)
            self.mark("forward")
            return batch

        def timed_backward(*args, **kwargs):
            self.mark("backward")
            return inner_backward(*args, **kwargs)

        _dataloader._BaseDataLoaderIter.__next__ = timed_next
        torch.autograd.backward = timed_backward
        opt.register_step_pre_hook(lambda *_: self.mark("optimizer"))
        opt.register_step_post_hook(lambda *_: self.end_step())

    def mark(self, phase):
        e = self.ready.pop()
        e.record(self.stream)
        self.spans.append((phase, e))

    def end_step(self):
        self.mark("gap")
        self.steps.append(self.spans)
        self.spans = []

    def rows_ms(self, phases):
        """Each closed step's phases summed, in ms (synchronizes: call it at the end)."""
        torch.cuda.synchronize()
        rows = []
        for marks, after in zip(self.steps, self.steps[1:]):
            total = dict.fromkeys(phases, 0.0)
            for (phase, a), (_next, b) in zip(marks, [*marks[1:], after[0]]):
                total[phase] += a.elapsed_time(b)
            rows.append([total[k] for k in phases])
        return rows
'''


GROUND_TRUTH = """
import json

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

ROWS, STEPS, WARMUP = 32768, 1000, 32  # ~4 s: ~30 timed steps at 8 a second
# the Boundaries helper (BOUNDARIES) goes here


def main():
    dev = torch.device("cuda")
    torch.manual_seed(0)
    g = torch.Generator(device=dev).manual_seed(0)
    features = torch.randn(ROWS, 1024, device=dev, generator=g)
    labels = torch.randint(0, 10, (ROWS,), device=dev, generator=g)
    loader = DataLoader(range(ROWS), batch_size=4096, shuffle=True, drop_last=True,
                        pin_memory=True, generator=torch.Generator().manual_seed(0))
    model = nn.Sequential(
        nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 4096), nn.GELU(),
        nn.Linear(4096, 4096), nn.GELU(), nn.Linear(4096, 10),
    ).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    marks = Boundaries(dev, 4 * STEPS + 8, opt)
    step = 0
    while step < STEPS:
        for idx in loader:
            idx = idx.to(dev, non_blocking=True)
            x, y = features[idx], labels[idx]
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            step += 1
            if step == STEPS:
                break
    rows = marks.rows_ms(("forward", "backward", "optimizer", "gap"))
    print("GROUND_TRUTH " + json.dumps({"warmup": WARMUP, "steps_ms": rows}))


if __name__ == "__main__":
    main()
""".replace("# the Boundaries helper (BOUNDARIES) goes here", BOUNDARIES)


def test_device_timeline_matches_the_jobs_own_cuda_events(tmp_path: Path) -> None:
    script = write_script(tmp_path, "ground_truth.py", GROUND_TRUTH)
    r = run_trainprof(tmp_path, str(script), env=gpu_env(), timeout=180)
    keep("device_timeline_ground_truth", r)
    assert r.returncode == 0, r.stderr[-3000:]
    job = tagged(r.stdout, "GROUND_TRUTH")
    per_step = [[ms / 1e3 for ms in row] for row in job["steps_ms"]]  # step i: its parts, s
    assert r.report is not None and r.report.get("device"), r.stderr[-3000:]
    device = r.report["device"]
    got = device["device_s"]
    timed = _timed_steps(r.run_dir)
    matched = [(step, parts) for step, parts in timed if step < len(per_step)]
    worst = {
        part: max((abs(parts[k] - per_step[step][k]) for step, parts in matched), default=None)
        for k, part in enumerate(PARTS)
    }
    steady = per_step[job["warmup"] :]
    truth = {part: statistics.mean(row[k] for row in steady) for k, part in enumerate(PARTS)}
    measured(
        {
            "measurement": "device_timeline_vs_cuda_events",
            "truth_s": truth,
            "probe_s": got,
            "timed_steps": [step for step, _parts in timed],
            "worst_matched_step_error_s": worst,
        }
    )
    assert device["timed_steps"] >= 8, device
    assert len(matched) >= 8, f"timed steps {[s for s, _p in timed]} of {len(per_step)}"
    assert_steps_match(matched, per_step, PARTS)
    for k, part in enumerate(PARTS):
        want, have = truth[part], got[part]
        assert have is not None, f"{part}: not measured by trainprof: {device}"
        sampling = 3 * statistics.stdev(row[k] for row in steady) / device["timed_steps"] ** 0.5
        tol = max(REL_TOL * want, ABS_TOL_S, sampling)
        assert abs(have - want) <= tol, (
            f"{part}: trainprof {have * 1e3:.3f} ms, job {want * 1e3:.3f} ms (mean of all steps)"
        )


def assert_steps_match(
    matched: list[tuple[int, list[float]]], per_step: list[list[float]], parts: tuple[str, ...]
) -> None:
    """Each timed step's parts against the job's own (s). Within 5 % or 50 µs: the same
    boundaries. Where the GPU has caught up with the host, the two records' distance on the
    device is the host's time between them, so any pause of the host there (a garbage
    collection, the scheduler) moves that step's boundary: 67–96 µs in 1–3 steps of 31–39 on
    the third H200 machine, ≤ 25 µs on the first two. A misplaced boundary moves most steps, and
    a step read as its neighbour the loader restarts' by milliseconds: so one step in five (one,
    at least) may miss the tight bound, none 20 % or 250 µs. Every miss is printed."""
    misses = []
    for step, have in matched:
        for k, part in enumerate(parts):
            want = per_step[step][k]
            if abs(have[k] - want) > max(0.05 * want, 50e-6):
                misses.append((step, part, have[k], want))
    measured({"measurement": "device_timeline_step_misses", "misses": misses})
    for part in parts:
        mine = [m for m in misses if m[1] == part]
        assert len(mine) <= max(1, len(matched) // 5), f"{part}: {len(mine)} steps off: {mine}"
    for step, part, have_s, want in misses:
        assert abs(have_s - want) <= max(0.2 * want, 250e-6), (
            f"step {step} {part}: trainprof {have_s * 1e3:.3f} ms, job {want * 1e3:.3f} ms"
        )


def _timed_steps(run_dir: Path) -> list[tuple[int, list[float]]]:
    """The steps trainprof timed on the device, from its event file: (step, parts in s)."""
    log = Session.load(run_dir).primary
    assert log is not None, f"no process in {run_dir}"
    return [(row[1], [us / 1e6 for us in row[2:6]]) for row in log.device if min(row[2:6]) >= 0]


ACCUMULATING = """
import json
import time

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

ROWS, STEPS, WARMUP, ACCUM = 32768, 220, 16, 4  # four micro-batches per optimizer step
WIDTH, BATCH, FETCH_S = 8192, 4096, 0.008
# the Boundaries helper (BOUNDARIES) goes here


def slow_collate(indices):
    time.sleep(FETCH_S)  # longer than the GPU's backlog: the GPU waits for each micro-batch
    return torch.tensor(indices)


def main():
    dev = torch.device("cuda")
    torch.manual_seed(0)
    g = torch.Generator(device=dev).manual_seed(0)
    features = torch.randn(ROWS, 1024, device=dev, generator=g)
    labels = torch.randint(0, 10, (ROWS,), device=dev, generator=g)
    loader = DataLoader(range(ROWS), batch_size=BATCH, shuffle=True, drop_last=True,
                        collate_fn=slow_collate, pin_memory=True,
                        generator=torch.Generator().manual_seed(0))
    # ~1.2 TFLOP forward and ~140 M parameters: each micro-batch's forward and backward, and
    # the optimizer, keep the GPU busy well past the host's launches, so the GPU waits for the
    # host only in the fetches (where the job's and the probe's records are one return apart)
    model = nn.Sequential(
        nn.Linear(1024, WIDTH), nn.GELU(), nn.Linear(WIDTH, WIDTH), nn.GELU(),
        nn.Linear(WIDTH, WIDTH), nn.GELU(), nn.Linear(WIDTH, 10),
    ).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    # forward, backward and data (a later micro-batch's fetch) per micro-batch; a fetch that
    # ends an epoch inside a step marks data twice
    marks = Boundaries(dev, (4 * ACCUM + 4) * STEPS, opt)
    it = iter(loader)

    def fetch():
        nonlocal it
        try:
            return next(it)
        except StopIteration:
            it = iter(loader)
            return next(it)

    for _ in range(STEPS):
        for _micro in range(ACCUM):
            idx = fetch().to(dev, non_blocking=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(features[idx]), labels[idx]) / ACCUM
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    rows = marks.rows_ms(("forward", "backward", "optimizer", "gap", "data"))
    print("GROUND_TRUTH " + json.dumps({"warmup": WARMUP, "steps_ms": rows}))


if __name__ == "__main__":
    main()
""".replace("# the Boundaries helper (BOUNDARIES) goes here", BOUNDARIES)


def test_micro_batches_are_summed_against_the_jobs_own_cuda_events(tmp_path: Path) -> None:
    """Gradient accumulation, 4 micro-batches a step: trainprof's forward and backward are the
    sums over the step's micro-batches (not the first one's), and its wait for the later
    micro-batches matches the job's own events around those fetches. (The first H200 runs'
    small, host-bound model left the GPU idle at every boundary, so each Python call between
    the job's record and the probe's counted: 60–90 µs a micro-batch, 11 % of a step's
    forward. Now the GPU is busy at each boundary but the fetches' ends.)"""
    script = write_script(tmp_path, "accumulating.py", ACCUMULATING)
    r = run_trainprof(tmp_path, str(script), env=gpu_env(), timeout=180)
    keep("device_timeline_micro_batches", r)
    assert r.returncode == 0, r.stderr[-3000:]
    job = tagged(r.stdout, "GROUND_TRUTH")
    per_step = [[ms / 1e3 for ms in row] for row in job["steps_ms"]]
    log = Session.load(r.run_dir).primary
    assert log is not None
    parts = (*PARTS, "data_between_micro_batches")
    timed = [(row[1], [row[k] / 1e6 for k in (2, 3, 4, 5, 13)]) for row in log.device]
    matched = [(s, p) for s, p in timed if s < len(per_step) and min(p) >= 0]
    measured(
        {
            "measurement": "device_timeline_micro_batches",
            "matched": [(s, p, per_step[s]) for s, p in matched[:12]],
        }
    )
    assert len(matched) >= 8, f"timed steps {[s for s, _p in timed]} of {len(per_step)}"
    assert_steps_match(matched, per_step, parts)


NO_SYNC_LOOP = """
import json
import time

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

# ~6.6 TFLOP a step (~10 ms on an H200): far more than the host's ~2.5 ms of launches there.
ROWS, WIDTH, BATCH, STEPS, WARMUP = 32768, 8192, 8192, 600, 100


def main():
    dev = torch.device("cuda")
    torch.manual_seed(0)
    g = torch.Generator(device=dev).manual_seed(0)
    features = torch.randn(ROWS, WIDTH, device=dev, generator=g)
    labels = torch.randint(0, 10, (ROWS,), device=dev, generator=g)
    loader = DataLoader(range(ROWS), batch_size=BATCH, shuffle=True, drop_last=True,
                        pin_memory=True, generator=torch.Generator().manual_seed(0))
    model = nn.Sequential(
        nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH), nn.ReLU(),
        nn.Linear(WIDTH, 10),
    ).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    step, h0, launch_s = 0, 0.0, 0.0
    while step < STEPS:
        for idx in loader:
            if step == WARMUP - 8:  # the host's own cost of a step: 4 steps launched, no wait
                torch.cuda.synchronize()
                h0 = time.perf_counter()
            if step == WARMUP - 4:
                launch_s = (time.perf_counter() - h0) / 4
            if step == WARMUP:
                torch.cuda.synchronize()
                start.record()
            idx = idx.to(dev, non_blocking=True)
            x, y = features[idx], labels[idx]
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            step += 1
            if step == STEPS:
                break
    end.record()
    end.synchronize()
    n = STEPS - WARMUP
    rate = {"steps_per_s": n / (start.elapsed_time(end) / 1e3), "host_steps_per_s": 1 / launch_s}
    print("RATE " + json.dumps(rate))


if __name__ == "__main__":
    main()
"""


def _rate(script: Path, tmp: Path, under_trainprof: bool) -> dict[str, Any]:
    env = gpu_env()
    if under_trainprof:
        r = run_trainprof(tmp, str(script), env=env, timeout=180)
        assert r.returncode == 0, r.stderr[-3000:]
        return tagged(r.stdout, "RATE")
    proc = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return tagged(proc.stdout, "RATE")


def test_probe_adds_no_synchronization(tmp_path: Path) -> None:
    script = write_script(tmp_path, "no_sync_loop.py", NO_SYNC_LOOP)
    plain: list[float] = []
    probed: list[float] = []
    host: list[float] = []
    for under in (False, True, True, False):  # A B B A: a drift favours neither
        rate = _rate(script, tmp_path, under)
        (probed if under else plain).append(rate["steps_per_s"])
        if not under:
            host.append(rate["host_steps_per_s"])
    ratio = statistics.mean(probed) / statistics.mean(plain)
    measured(
        {
            "measurement": "probe_no_sync",
            "plain_steps_per_s": plain,
            "trainprof_steps_per_s": probed,
            "plain_host_launch_steps_per_s": host,  # the host alone could go this fast
            "ratio": round(ratio, 4),
        }
    )
    if statistics.mean(host) < 1.2 * statistics.mean(plain):
        # The host must run well ahead of the GPU, or a sync per step would not show.
        pytest.skip(f"loop not GPU-bound enough: host {host}, GPU {plain} steps/s")
    assert ratio >= MIN_RATIO, f"trainprof/plain = {ratio:.3f} ({probed} vs {plain} steps/s)"
