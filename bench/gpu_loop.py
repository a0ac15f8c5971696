"""The CUDA training job the GPU overhead check runs (``bench/gpu_check.py``), as a script,
plain and under ``trainprof run``.

A steady-state loop per size ``HxBxD``: an MLP (256 → H, then D hidden H → H layers, → 10,
ReLU) trained with AdamW (``fused`` on CUDA) under bf16 autocast. The data lives on the
device; a ``DataLoader`` over batches of indices (a sampler that yields B shuffled indices as
one tensor, pinned, ``num_workers=0``) feeds each step, so every step goes through the loader's
``__next__``, its sampler, the dataset fetch and collate, a host→device copy and an optimizer
step: the probe's whole hot path, device timeline included. The loader and optimizer are the
light kinds a fast job uses (a per-sample loader costs ≈ 50 µs a step of Python here, ≈ 5 % at
1000 steps/s), so that a small model reaches ≈ 1000 steps/s on a slow host. Nothing in the loop synchronizes: the host runs ahead of the GPU when the
GPU is the bottleneck, as in a real job.

The loop times itself on the device's clock: after a warm-up it records a CUDA event, runs
steps for a fixed host duration, records a second event and synchronizes once; the rate is
``steps / elapsed_time`` between the two events (with ``--device cpu``, for trying the
harness without a GPU, the host clock). Several sizes run one after the other in one process
(start-up paid once); all models share one optimizer, one param group per model, so the probe
sees a single primary optimizer and times steps of every size.

The last line on stdout is one JSON object: ``{"rates": [{"size": "HxBxD", "steps_per_s": r,
"host_steps_per_s": h, "steps": n, "seconds": s}, ...], "device": name, "startup_s": ...}``.

``--calibrate 1000,100`` instead picks a size per target rate by measuring: for ≥ 300 steps/s
a host-bound small model (H=256, B=256) made deeper until it runs at the target, for slower
targets a GPU-bound one (B=8192, D=1) made wider; it prints ``{"sizes": [...], "measured":
[...], "device": name}``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import sys
import time
from typing import Any

T_START = time.perf_counter()

IN_DIM = 256
OUT_DIM = 10
DEFAULT_SIZES = "256x256x8,8192x8192x1"  # ≈1000 and ≈100 steps/s on an H100 (estimated)
DEPTHS = (0, 1, 2, 4, 8, 16, 32, 64)  # calibration grid, host-bound sizes (H=256, B=256)
WIDTHS = (1024, 2048, 4096, 6144, 8192, 12288, 16384)  # GPU-bound sizes (B=8192, D=1)


def seconds_per_size(spec: str, sizes: int) -> list[float]:
    """``--toggle-s``: seconds for each of ``sizes`` sizes, comma-separated, the last repeating."""
    given = [float(x) for x in spec.split(",")]
    return [given[min(i, len(given) - 1)] for i in range(sizes)]


def parse_size(spec: str) -> tuple[int, int, int]:
    """``"512x64x2"`` → (512, 64, 2); batch defaults to 256, depth to 1."""
    parts = [int(p) for p in spec.split("x")]
    hidden, batch, depth = (parts + [256, 1][len(parts) - 1 :])[:3]
    return hidden, batch, depth


class Clock:
    """Elapsed time on the device's clock (CUDA events) or, on CPU, the host's."""

    def __init__(self, torch: Any, device: Any) -> None:
        self.torch = torch
        self.cuda = device.type == "cuda"

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def mark(self) -> Any:
        if not self.cuda:
            return time.perf_counter()
        ev = self.torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def seconds(self, a: Any, b: Any) -> float:
        if not self.cuda:
            return float(b - a)
        b.synchronize()
        return float(a.elapsed_time(b)) / 1e3


class BatchIndices:
    """A sampler of whole batches: each epoch, ``batches`` tensors of ``batch`` shuffled indices
    (one ``randperm`` an epoch, not a Python index a sample)."""

    def __init__(self, torch: Any, rows: int, batch: int, seed: int) -> None:
        self.torch, self.rows, self.batch = torch, rows, batch
        self.generator = torch.Generator().manual_seed(seed)

    def __len__(self) -> int:
        return self.rows // self.batch

    def __iter__(self) -> Any:
        perm = self.torch.randperm(self.rows, generator=self.generator)
        return iter(perm[: len(self) * self.batch].view(len(self), self.batch))


class Indices:
    """The dataset the loader fetches from: a batch of indices is its own item (the rows live
    on the device, gathered by the step)."""

    def __init__(self, rows: int) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return self.rows

    def __getitem__(self, index: Any) -> Any:
        return index


class Trainer:
    """One model, its on-device data and its index loader; ``run`` steps it for a while."""

    def __init__(self, torch: Any, device: Any, spec: str, seed: int) -> None:
        from torch import nn
        from torch.utils.data import DataLoader

        hidden, batch, depth = parse_size(spec)
        self.torch = torch
        self.device = device
        self.spec = spec
        rows = max(16384, 4 * batch)
        g = torch.Generator(device=device).manual_seed(seed)
        self.x = torch.randn(rows, IN_DIM, device=device, generator=g)
        self.y = torch.randint(0, OUT_DIM, (rows,), device=device, generator=g)
        layers: list[Any] = [nn.Linear(IN_DIM, hidden, device=device), nn.ReLU()]
        for _ in range(depth):
            layers += [nn.Linear(hidden, hidden, device=device), nn.ReLU()]
        layers.append(nn.Linear(hidden, OUT_DIM, device=device))
        self.model = nn.Sequential(*layers)
        self.loader = DataLoader(
            Indices(rows),
            batch_size=None,  # the sampler yields whole batches
            sampler=BatchIndices(torch, rows, batch, seed),
            pin_memory=device.type == "cuda",
        )
        self._it = iter(self.loader)
        self.optimizer: Any = None  # set by trainers(): one optimizer for all sizes
        self.clock = Clock(torch, device)

    def _batch(self) -> Any:
        try:
            return next(self._it)
        except StopIteration:
            self._it = iter(self.loader)
            return next(self._it)

    def fetcher(self) -> Any:
        """The dataset fetcher of the epoch in progress (its ``collate_fn`` the probe's timer)."""
        return getattr(self._it, "_dataset_fetcher", None)

    def step(self) -> None:
        torch = self.torch
        idx = self._batch().to(self.device, non_blocking=True)
        x, y = self.x[idx], self.y[idx]
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast(self.device.type, dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        self.optimizer.step()

    def run(self, seconds: float, min_steps: int = 1) -> tuple[int, float, float]:
        """Steps for ``seconds`` of host time: (steps, device seconds, host seconds)."""
        self.clock.sync()
        start = self.clock.mark()
        t0 = time.perf_counter()
        n = 0
        while n < min_steps or time.perf_counter() - t0 < seconds:
            self.step()
            n += 1
        host = time.perf_counter() - t0
        end = self.clock.mark()
        return n, self.clock.seconds(start, end), host


def _device(torch: Any, name: str) -> Any:
    if name == "cuda" and not torch.cuda.is_available():
        raise SystemExit("gpu_loop: CUDA is not available (use --device cpu to try the harness)")
    return torch.device(name)


def device_name(torch: Any, device: Any) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def trainers(torch: Any, device: Any, sizes: list[str]) -> list[Trainer]:
    built = [Trainer(torch, device, spec, seed=i) for i, spec in enumerate(sizes)]
    groups = [{"params": list(t.model.parameters())} for t in built]
    # one optimizer: the probe's primary one; fused: one kernel a step, not one per foreach op
    optimizer = torch.optim.AdamW(groups, lr=1e-4, fused=device.type == "cuda")
    for t in built:
        t.optimizer = optimizer
    return built


def measure(device_arg: str, sizes: list[str], warmup_s: float, measure_s: float) -> dict[str, Any]:
    import torch

    device = _device(torch, device_arg)
    built = trainers(torch, device, sizes)
    startup = time.perf_counter() - T_START
    rates = []
    for tr in built:
        tr.run(warmup_s, min_steps=5)
        n, secs, host = tr.run(measure_s, min_steps=10)
        rates.append(
            {
                "size": tr.spec,
                "steps_per_s": n / secs,
                "host_steps_per_s": n / host,
                "steps": n,
                "seconds": secs,
            }
        )
    return {"rates": rates, "device": device_name(torch, device), "startup_s": startup}


OUTSIDE = ("outside", "runner", "py-spy")  # the toggle's modes that stop outside processes


class OutsideSwitch:
    """Stops trainprof's processes outside the job (the ``trainprof run`` parent with its
    psutil/NVML sampler and watchdog, and py-spy) with SIGSTOP for an "outside off" block, and
    lets them go on with SIGCONT: their cost to the job, measured inside one process, where
    whole-process rounds on a GPU machine scatter by ±10 %. Benchmark only."""

    def __init__(self) -> None:
        import psutil

        self.psutil = psutil
        self.stopped: list[int] = []
        try:
            parent = psutil.Process(os.getppid())
            ours = "trainprof" in " ".join(parent.cmdline())
        except psutil.Error:
            parent, ours = None, False
        self.parent = parent if ours else None

    @property
    def found(self) -> bool:
        return self.parent is not None

    def set(self, which: str | None) -> None:
        """Stop ``which`` of trainprof's outside processes: ``outside`` (all of them),
        ``runner`` (the ``trainprof run`` parent alone: its samplers) or ``py-spy`` (alone);
        None lets them all go on."""
        if which is None:
            self.resume()
            return
        if self.stopped or self.parent is None:
            return
        if which in ("outside", "runner"):
            self._stop(self.parent.pid)  # first: it starts no new py-spy while we list
        if which in ("outside", "py-spy"):
            mine = {os.getpid(), *(c.pid for c in self.psutil.Process().children(recursive=True))}
            with contextlib.suppress(self.psutil.Error):
                for child in self.parent.children(recursive=True):
                    if child.pid not in mine and (which == "outside" or "py-spy" in child.name()):
                        self._stop(child.pid)

    def _stop(self, pid: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
            self.stopped.append(pid)

    def resume(self) -> None:
        for pid in reversed(self.stopped):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        self.stopped = []


def toggle(
    device_arg: str,
    sizes: list[str],
    warmup_s: float,
    size_seconds: list[float],  # one per size
    block_steps: int,
    by_part: bool = False,
    hooks_only: bool = False,
) -> dict[str, Any]:
    """Under ``trainprof run``: trainprof's cost per step on the device's clock, from
    interleaved blocks of ``block_steps`` steps with the probe's hooks on, unchanged (an A/A
    control), all off (``bench.loop.ProbeSwitch``), trainprof's outside
    processes stopped (``outside``: samplers and py-spy) and both (``everything``); with
    ``by_part``, each hook part alone (all off but it) and the loop's parts as empty wrappers
    (more modes: fewer blocks of each); with ``hooks_only`` the first three alone (more blocks of
    each). Each block is timed by two CUDA events, read only at the end (no sync inside the
    measurement). Cost = step time "on" minus the mode's (a part alone or empty: the mode's
    minus "all off"), from the median block (robust: the hooks' steady cost), from the mean (counts rare stalls
    too, such as a sampler's read every 0.5 s) and paired: the median over cycles of "on" minus
    the mode's block of the same cycle, with its ~95 % half-width (a drift cancels)."""
    import torch

    from bench.loop import ProbeSwitch, interleave
    from bench.stats import median, paired_difference

    device = _device(torch, device_arg)
    built = trainers(torch, device, sizes)
    # Hooks as they are in the steady state: the zero_grad and autocast watches leave after the
    # first steps, the CUDA timeline (and with it the pre-step hook of its timed steps) starts at
    # the first
    built[0].run(0.0, min_steps=5)
    switch = ProbeSwitch(lambda: [tr.fetcher() for tr in built])
    outside = OutsideSwitch()
    parts = [p for p, ok in switch.found.items() if ok]
    modes = [("on", frozenset()), ("same", frozenset()), ("all", frozenset(parts))]
    if outside.found and not hooks_only:
        modes += [
            ("outside", frozenset({"outside"})),
            ("runner", frozenset({"runner"})),  # the psutil/NVML sampler's process alone
            ("py-spy", frozenset({"py-spy"})),
            ("everything", frozenset([*parts, "outside"])),
        ]
    empties: list[str] = []
    if by_part:  # each part alone (all off but it), and the loop's parts as empty wrappers
        # (the pre-step hook is in only with the post-hook: never alone)
        modes += [(f"{p} alone", frozenset(parts) - {p}) for p in parts if p != "pre_step"]
        empties = [p for p in ("steps", "loader", "fetch") if p in parts]
        modes += [(f"{p} empty", frozenset(parts) - {p}) for p in empties]
    out = []
    try:
        for tr, seconds in zip(built, size_seconds, strict=True):
            tr.run(warmup_s, min_steps=5)
            blocks: dict[str, list[tuple[Any, Any]]] = {name: [] for name, _ in modes}

            def block(
                name: str, off: frozenset[str], tr: Trainer = tr, blocks: Any = blocks
            ) -> None:
                empty = frozenset({name[: -len(" empty")]}) if name.endswith(" empty") else None
                switch.set(off, empty or frozenset())
                outside.set(next((w for w in OUTSIDE if w in off), None))
                tr.step()  # the first step after a switch refills Python's caches
                a = tr.clock.mark()
                for _ in range(block_steps):
                    tr.step()
                blocks[name].append((a, tr.clock.mark()))

            interleave(modes, seconds, block)
            switch.set(frozenset())
            outside.resume()
            tr.clock.sync()
            per_step = {
                name: [tr.clock.seconds(a, b) / block_steps for a, b in pairs]
                for name, pairs in blocks.items()
            }
            med = {name: median(v) for name, v in per_step.items()}
            mean = {name: sum(v) / len(v) for name, v in per_step.items()}
            # a part alone or empty costs what it adds to "all off"; any other mode what it
            # saves against "on"
            ref = {
                name: ("all", name) if name.endswith((" alone", " empty")) else (name, "on")
                for name, _ in modes[1:]
            }
            out.append(
                {
                    "size": tr.spec,
                    "steps_per_s": 1.0 / med["on"],
                    "block_steps": block_steps,
                    "blocks_per_mode": len(blocks["on"]),
                    "cost_us": {n: (med[b] - med[a]) * 1e6 for n, (a, b) in ref.items()},
                    "cost_us_mean": {n: (mean[b] - mean[a]) * 1e6 for n, (a, b) in ref.items()},
                    "cost_us_paired": {
                        n: [v * 1e6 for v in paired_difference(per_step[b], per_step[a])]
                        for n, (a, b) in ref.items()
                    },
                    # each block's µs a step, in cycle order: the raw data, for a later look
                    "blocks_us": {
                        name: [round(v * 1e6, 2) for v in values]
                        for name, values in per_step.items()
                    },
                }
            )
    finally:
        outside.resume()
    found = dict(switch.found, outside=outside.found)
    return {"toggle": out, "parts_found": found, "device": device_name(torch, device)}


def calibrate(device_arg: str, targets: list[float]) -> dict[str, Any]:
    import torch

    device = _device(torch, device_arg)

    def step_s(spec: str) -> float:
        (tr,) = trainers(torch, device, [spec])
        tr.run(0.1, min_steps=3)
        n, secs, _host = tr.run(0.25, min_steps=3)
        del tr
        if device.type == "cuda":
            torch.cuda.empty_cache()
        return secs / n

    sizes, measured, grids = [], [], {}
    for target in targets:
        fast = target >= 300
        grid = DEPTHS if fast else WIDTHS
        spec = "256x256x{}" if fast else "{}x8192x1"
        points: list[tuple[int, float]] = []
        for v in grid:
            points.append((v, step_s(spec.format(v))))
            if points[-1][1] > 1.5 / target:
                break
        chosen = spec.format(_interpolate(points, 1.0 / target, 1 if fast else 256))
        measured.append(1.0 / step_s(chosen))
        sizes.append(chosen)
        grids[str(target)] = points
    return {
        "sizes": sizes,
        "measured": measured,
        "grid": grids,
        "device": device_name(torch, device),
    }


def _interpolate(points: list[tuple[int, float]], period: float, quantum: int) -> int:
    """The grid value whose step time is ``period``, interpolated in log-log space."""
    pts = sorted(points)
    if period <= pts[0][1]:
        return pts[0][0]  # even the smallest is slower than the target: as fast as it gets
    for (v0, t0), (v1, t1) in zip(pts, pts[1:], strict=False):
        if t0 <= period <= t1 and v0 <= 0:  # no log of 0: the nearer of the two
            return v0 if period - t0 <= t1 - period else v1
        if t0 <= period <= t1 and t1 > t0:
            f = (math.log(period) - math.log(t0)) / (math.log(t1) - math.log(t0))
            v = math.exp(math.log(v0) + f * (math.log(v1) - math.log(v0)))
            return max(quantum, int(round(v / quantum)) * quantum)
    return pts[-1][0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sizes", default=DEFAULT_SIZES, help="HIDDENxBATCHxDEPTH, comma-separated")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--warmup-s", type=float, default=0.5)
    ap.add_argument("--measure-s", type=float, default=1.5)
    ap.add_argument(
        "--toggle-s",
        default="",
        help="--toggle: seconds per size, comma-separated (the last repeats; default "
        "--measure-s): a fast size needs longer to resolve a few µs a step",
    )
    ap.add_argument("--calibrate", default="", help="target steps/s, comma-separated")
    ap.add_argument("--toggle", action="store_true", help="in-process probe on/off blocks")
    ap.add_argument("--block-steps", type=int, default=20, help="--toggle: steps per block")
    ap.add_argument(
        "--by-part", action="store_true", help="--toggle: each hook part alone, and empty"
    )
    ap.add_argument(
        "--hooks-only", action="store_true", help="--toggle: on, A/A and all hooks off alone"
    )
    ap.add_argument(
        "--cpu",
        type=int,
        default=None,
        help="pin the loop to this CPU (the same in every run compared: the host-bound loop's "
        "speed then does not depend on where the scheduler put it)",
    )
    args = ap.parse_args(argv)
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})  # trainprof's own processes stay free to move
    if args.toggle:
        out = toggle(
            args.device,
            args.sizes.split(","),
            args.warmup_s,
            seconds_per_size(args.toggle_s or str(args.measure_s), len(args.sizes.split(","))),
            args.block_steps,
            args.by_part,
            args.hooks_only,
        )
    elif args.calibrate:
        out = calibrate(args.device, [float(x) for x in args.calibrate.split(",")])
    else:
        out = measure(args.device, args.sizes.split(","), args.warmup_s, args.measure_s)
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
