"""The synthetic training job the overhead benchmark runs (as a script, under each variant).

A steady-state loop per size ``HxB``: an MLP (32 → H → H → 10, ReLU) trained with SGD on an
in-memory ``TensorDataset`` through a ``DataLoader`` (batch B, shuffled, ``num_workers=0``),
so every step goes through the loader's ``__next__``/``_next_index``, the dataset fetch and
an optimizer step: the probe's whole hot path. One thread (``torch.set_num_threads(1)``).
The slower sizes use larger batches so that their matmuls are compute-bound: a width-only
knob at batch 8 streams the weights from memory, and on a shared machine that rate jumps by
a factor of 1.5 between runs (measured), which would drown any overhead.

The loop measures itself: after a warm-up it times whole steps for a fixed duration and
reports ``steps / (end of the last step - end of the last warm-up step)``, so the rate has
no quantisation error even at 10 steps/s. Several sizes run one after the other in one
process (start-up — importing torch, the first optimizer importing ``torch._dynamo`` — is
paid once); all models share one optimizer, one param group per model, so the probe sees a
single primary optimizer and records every step of every size, as it would in a real job.
Only inactive groups' parameters (no gradient) are skipped by ``SGD.step``: the same small
cost in every variant.

The last line on stdout is one JSON object: ``{"rates": [{"size": "HxB", "steps_per_s": r,
"steps": n, "seconds": s, "cpu_steps_per_s": c}, ...], "startup_s": ...}``, where ``c`` is
steps per second of the loop thread's own CPU time (``time.thread_time``): time the job was
preempted does not count in it, so it isolates work added inside the process.

``--calibrate 1000,100,10`` instead picks a hidden width per target rate (steps/s) by
measuring (batch 8 for ≥ 300 steps/s, 64 for ≥ 30, else 256), and prints
``{"sizes": ["HxB", ...], "measured": [...]}``.

``--toggle`` (run with the probe inside) measures the probe's own cost in one process: it
switches the probe's hooks off and on between short blocks of ~10 steps (rotating through
"all hooks on", "nothing changed" (an A/A control), "all off" and each part off) and reports,
per mode, how much lower its median step time is than that of "all on". Short interleaved
blocks share the machine's momentary load, and medians ignore the steps a neighbour preempted:
process-level ratios on a noisy machine cannot resolve a few microseconds per step; this can
(about ±1-3 µs here, the A/A value says how much).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

T_START = time.perf_counter()

IN_DIM = 32
OUT_DIM = 10
DATASET = 8192
GRID = (16, 64, 256, 512, 768, 1024, 1536, 2048, 3072, 4096)
# ≈1000, ≈100, ≈10 steps/s on the 2-core Xeon VM this was written on (measured; --calibrate)
DEFAULT_SIZES = "512x8,1472x64,2816x256"


def parse_size(spec: str) -> tuple[int, int]:
    """``"512x8"`` → (512, 8); a bare width means batch 8."""
    hidden, _, batch = spec.partition("x")
    return int(hidden), int(batch or 8)


def _build(torch: Any, hidden: int, batch: int, seed: int) -> tuple[Any, Any]:
    from torch.utils.data import DataLoader, TensorDataset

    g = torch.Generator().manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(IN_DIM, hidden),
        torch.nn.ReLU(),
        torch.nn.Linear(hidden, hidden),
        torch.nn.ReLU(),
        torch.nn.Linear(hidden, OUT_DIM),
    )
    data = TensorDataset(
        torch.randn(DATASET, IN_DIM, generator=g),
        torch.randint(0, OUT_DIM, (DATASET,), generator=g),
    )
    loader = DataLoader(data, batch_size=batch, shuffle=True, num_workers=0, generator=g)
    return model, loader


class Trainer:
    """One model and its loader; ``run`` steps it until a duration is over."""

    def __init__(self, torch: Any, model: Any, loader: Any, optimizer: Any) -> None:
        self.model = model
        self.loader = loader
        self.optimizer = optimizer
        self.loss_fn = torch.nn.CrossEntropyLoss()
        self._it = iter(loader)
        model.train()

    def _batch(self) -> Any:
        try:
            return next(self._it)
        except StopIteration:
            self._it = iter(self.loader)  # a new epoch: the loader's epoch start is part of the job
            return next(self._it)

    def run(self, seconds: float, min_steps: int = 1) -> tuple[int, float]:
        """Step until ``seconds`` have passed (and at least ``min_steps``); (steps, elapsed)."""
        clock = time.perf_counter
        opt, model, loss_fn = self.optimizer, self.model, self.loss_fn
        n = 0
        t0 = now = clock()
        while n < min_steps or now - t0 < seconds:
            x, y = self._batch()
            opt.zero_grad(set_to_none=True)
            loss_fn(model(x), y).backward()
            opt.step()
            n += 1
            now = clock()
        return n, now - t0

    def fetcher(self) -> Any:
        """The dataset fetcher of the epoch in progress (its ``collate_fn`` the probe's timer)."""
        return getattr(self._it, "_dataset_fetcher", None)

    def run_each(self, steps: int, out: list[float]) -> None:
        """Step ``steps`` times, appending each step's duration to ``out``."""
        clock = time.perf_counter
        opt, model, loss_fn = self.optimizer, self.model, self.loss_fn
        last = clock()
        for _ in range(steps):
            x, y = self._batch()
            opt.zero_grad(set_to_none=True)
            loss_fn(model(x), y).backward()
            opt.step()
            now = clock()
            out.append(now - last)
            last = now


def _trainers(torch: Any, sizes: list[str]) -> list[Trainer]:
    built = [_build(torch, *parse_size(spec), seed=i) for i, spec in enumerate(sizes)]
    groups = [{"params": list(model.parameters())} for model, _ in built]
    optimizer = torch.optim.SGD(groups, lr=0.01)  # one optimizer: the probe's primary one
    return [Trainer(torch, model, loader, optimizer) for model, loader in built]


def measure(sizes: list[str], warmup_s: float, measure_s: float) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    trainers = _trainers(torch, sizes)
    startup = time.perf_counter() - T_START
    rates = []
    for h, tr in zip(sizes, trainers, strict=True):
        tr.run(warmup_s, min_steps=3)
        c0 = time.thread_time()
        n, secs = tr.run(measure_s, min_steps=5)
        cpu = time.thread_time() - c0
        rates.append(
            {
                "size": h,
                "steps_per_s": n / secs,
                "steps": n,
                "seconds": secs,
                "cpu_steps_per_s": n / cpu if cpu > 0 else None,
            }
        )
    return {"rates": rates, "startup_s": startup}


class ProbeSwitch:
    """Turns the probe's hot-path hooks off and on again (benchmark only).

    Finds them by what the probe's hook modules install: ``functools.wraps`` wrappers
    (their ``__wrapped__`` is the original) on the DataLoader iterator and dataset fetchers,
    ``torch.autograd.backward`` (the device timeline's backward mark and, outside it in a DDP
    job, the collective timer's wrapper), ``Optimizer.zero_grad`` and ``autocast.__enter__``
    (in their first steps only), and global optimizer post-hooks, all functions whose globals
    are those modules'; the pre-step hook, which the post-hook registers around a CUDA
    timeline's timed steps, through the probe's state. Built after a few steps, it switches the
    hooks of the steady state.
    The collate timer wraps each fetcher's collate_fn when the fetcher is built: it is switched
    with the "fetch" part in the fetchers ``fetchers`` returns (the epochs in progress), and
    fetchers built later follow the wrapped ``__init__``.
    """

    def __init__(self, fetchers: Callable[[], list[Any]] | None = None) -> None:
        import torch.amp.autocast_mode as amp_mod
        import torch.autograd as autograd
        import torch.optim.optimizer as optim_mod
        import torch.utils.data._utils.fetch as fetch_mod
        import torch.utils.data.dataloader as dl

        self._hooks = optim_mod._global_optimizer_post_hooks
        self.parts: dict[str, list[tuple[Any, str, Any, Any]]] = {
            "steps": [],
            "loader": [],
            "fetch": [],
            "backward": [],
            "zero_grad": [],
            "autocast": [],
        }
        slots = [
            ("loader", dl._BaseDataLoaderIter, "__next__"),
            ("loader", dl._BaseDataLoaderIter, "_next_index"),
            ("loader", dl.DataLoader, "__iter__"),
            ("fetch", fetch_mod._MapDatasetFetcher, "fetch"),
            ("fetch", fetch_mod._IterableDatasetFetcher, "fetch"),
            ("fetch", fetch_mod._BaseDatasetFetcher, "__init__"),
            ("backward", autograd, "backward"),
            ("zero_grad", optim_mod.Optimizer, "zero_grad"),
            ("autocast", amp_mod.autocast, "__enter__"),
        ]
        for part, owner, name in slots:
            fn = vars(owner).get(name)
            orig = _unwrapped(fn)
            if orig is not fn:
                self.parts[part].append((owner, name, fn, orig))
        self._fetchers = fetchers or list
        self._step_hooks = {k: v for k, v in self._hooks.items() if _in_probe(v)}
        # The pre-step hook is registered around timed steps only, by the post-hook: it is off
        # while the probe may not register it (and removed, if it is in place).
        from trainprof.probe.device_marks import sync_pre_step
        from trainprof.probe.state import state

        self._probe_state = state
        self._sync_pre_step = sync_pre_step
        self._pre_step_hooks = self._probe_state.pre_step_hooks
        self.found = {p: bool(v) for p, v in self.parts.items()}
        self.found["steps"] = bool(self._step_hooks)
        self.found["pre_step"] = self._pre_step_hooks is not None

    def set(self, off: frozenset[str], empty: frozenset[str] = frozenset()) -> None:
        """Parts in ``off`` switched off, parts in ``empty`` replaced by empty wrappers (each
        calls what it wraps and nothing else: an empty hook for the optimizer step), the rest
        on as the probe installed them."""
        for part, slots in self.parts.items():
            for owner, name, hooked, orig in slots:
                use = _empty(orig) if part in empty else orig if part in off else hooked
                setattr(owner, name, use)
        for fetcher in self._fetchers():
            collate = getattr(fetcher, "collate_fn", None)
            timed = getattr(fetcher, "_tp_timed_collate", None)
            if timed is None and _in_probe(collate):
                timed = fetcher._tp_timed_collate = collate
            if timed is not None:
                orig = timed.__wrapped__
                fetcher.collate_fn = (
                    _empty(orig) if "fetch" in empty else orig if "fetch" in off else timed
                )
        for k, v in self._step_hooks.items():
            if "steps" in empty:
                self._hooks[k] = _empty_hook
            elif "steps" in off:
                self._hooks.pop(k, None)
            else:
                self._hooks[k] = v
        if self.found["pre_step"]:
            pre_off = "pre_step" in off or "steps" in off  # without the post-hook, no timed step
            if pre_off:
                self._sync_pre_step(self._probe_state, False)
            self._probe_state.pre_step_hooks = None if pre_off else self._pre_step_hooks


_EMPTY: dict[int, Any] = {}  # id(original) -> its empty wrapper (one, so caches stay warm)


def _empty(orig: Any) -> Any:
    """A wrapper that calls ``orig`` and does nothing else: what wrapping alone costs."""
    wrapper = _EMPTY.get(id(orig))
    if wrapper is None:

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return orig(*args, **kwargs)

        _EMPTY[id(orig)] = wrapper
    return wrapper


def _empty_hook(optimizer: Any, args: Any, kwargs: Any) -> None:
    """An optimizer post-hook that does nothing: what torch's call of a hook costs."""


def _unwrapped(fn: Any) -> Any:
    """``fn`` without the probe's ``functools.wraps`` wrappers around it: the hook modules' and
    the collective timer's, which wraps ``torch.autograd.backward`` outside the backward mark."""
    while _in_probe(fn):
        inner = getattr(fn, "__wrapped__", None)
        if inner is None:
            break
        fn = inner
    return fn


PROBE = "trainprof.probe."  # the hook modules, the collective timer: every wrapper of the probe's


def _in_probe(fn: Any) -> bool:
    """True for a function written in the probe's modules (``functools.wraps`` copies
    ``__module__``, so the function's globals tell)."""
    return str(getattr(fn, "__globals__", {}).get("__name__")).startswith(PROBE)


def toggle(
    sizes: list[str], warmup_s: float, measure_s: float, block_s: float, by_part: bool = False
) -> dict[str, Any]:
    """Per size: the probe's in-loop cost per step (µs), all hooks and each hook part alone, from
    interleaved blocks of real steps with the hooks on, unchanged (an A/A control), all off, and
    all off but one part. A block's step time is the median of its steps (a preempted step does
    not count); each cost is paired: the median over cycles of one mode's block minus the
    reference's block of the same cycle (a drift cancels), with its ~95 % half-width."""
    import torch

    if __package__ != "bench":  # run as a script: the repository root holds the bench package
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.stats import paired_difference

    torch.set_num_threads(1)
    trainers = _trainers(torch, sizes)
    trainers[0].run(0.0, min_steps=5)  # the hooks of the steady state (some leave after a step)
    switch = ProbeSwitch(lambda: [tr.fetcher() for tr in trainers])
    parts = [p for p, ok in switch.found.items() if ok]
    # "same" switches nothing: its difference to "on" is the measurement's noise (an A/A test);
    # "p alone" is all off but p: its difference to "all" is that part's own cost
    modes: list[tuple[str, frozenset[str]]] = [
        ("on", frozenset()),
        ("same", frozenset()),
        ("all", frozenset(parts)),
    ]
    # (with ``by_part``; fewer modes give each more blocks) "p empty" is all off but p, which
    # calls what it wraps and nothing else (its floor)
    alone = [p for p in parts if p != "pre_step"] if by_part else []  # it needs the post-hook
    empties = [p for p in ("steps", "loader", "fetch") if p in alone]
    modes += [(f"{p} alone", frozenset(parts) - {p}) for p in alone]
    modes += [(f"{p} empty", frozenset(parts) - {p}) for p in empties]
    out = []
    for h, tr in zip(sizes, trainers, strict=True):
        tr.run(warmup_s, min_steps=3)
        n_block = max(3, int(round(tr.run(0.2, min_steps=2)[0] / 0.2 * block_s)))
        blocks: dict[str, list[float]] = {name: [] for name, _ in modes}
        steps: dict[str, list[float]] = {name: [] for name, _ in modes}
        cpu: dict[str, list[float]] = {name: [] for name, _ in modes}  # thread CPU s a step

        def block(
            name: str,
            off: frozenset[str],
            tr: Any = tr,
            n: int = n_block,
            blocks: Any = blocks,
            steps: Any = steps,
            cpu: Any = cpu,
        ) -> None:
            switch.set(
                off, frozenset({name[: -len(" empty")]}) if name.endswith(" empty") else frozenset()
            )
            tr.run_each(1, [])  # the first step after a switch pays the type-cache refill
            got: list[float] = []
            c0 = time.thread_time()
            tr.run_each(n, got)
            cpu[name].append((time.thread_time() - c0) / n)
            steps[name] += got
            blocks[name].append(_median(got))

        cycle = interleave(modes, measure_s, block)
        switch.set(frozenset())
        med = {name: _median(v) for name, v in steps.items()}

        def costs(blocks: dict[str, list[float]]) -> dict[str, list[float]]:
            def paired(a: str, b: str) -> list[float]:
                return [v * 1e6 for v in paired_difference(blocks[a], blocks[b])]

            cost = {"same": paired("on", "same"), "all": paired("on", "all")}
            cost.update({p: paired(f"{p} alone", "all") for p in alone})
            cost.update({f"{p} empty": paired(f"{p} empty", "all") for p in empties})
            return cost

        out.append(
            {
                "size": h,
                "steps_per_s": 1.0 / med["on"],
                "block_steps": n_block,
                "cycles": cycle,
                "steps_per_mode": len(steps["on"]),
                # [median µs a step, ~95 % half-width]: "same" the A/A noise, "all" every hook,
                # each part its own cost (alone against all off), "p empty" its empty wrappers;
                # from the loop thread's CPU time a block (preemption does not count in it), and
                # from the median wall step of a block
                "cost_us_cpu": costs(cpu),
                "cost_us_paired": costs(blocks),
                "cost_us": {name: (med["on"] - med[name]) * 1e6 for name, _ in modes[1:3]},
            }
        )
    return {"toggle": out, "parts_found": switch.found}


def interleave(
    modes: list[tuple[str, frozenset[str]]],
    measure_s: float,
    block: Callable[[str, frozenset[str]], None],
) -> int:
    """Run ``block(name, parts_off)`` for every mode, in a rotating order (a slow drift then
    spreads evenly over the modes), until ``measure_s`` has passed and at least 3 cycles ran;
    the cycles run."""
    t_end = time.perf_counter() + measure_s
    cycle = 0
    while time.perf_counter() < t_end or cycle < 3:
        for name, off in modes[cycle % len(modes) :] + modes[: cycle % len(modes)]:
            block(name, off)
        cycle += 1
    return cycle


def _median(values: list[float]) -> float:
    v = sorted(values)
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


def calibrate(targets: list[float]) -> dict[str, Any]:
    """Hidden width per target rate: a coarse grid, then log-log interpolation and one check."""
    import torch

    torch.set_num_threads(1)

    def step_s(h: int, batch: int) -> float:
        (tr,) = _trainers(torch, [f"{h}x{batch}"])
        tr.run(0.15, min_steps=2)
        n, secs = tr.run(0.4, min_steps=3)
        return secs / n

    sizes, measured, grids = [], [], {}
    for target in targets:
        batch = 8 if target >= 300 else 64 if target >= 30 else 256
        points: list[tuple[int, float]] = []
        for h in GRID:
            points.append((h, step_s(h, batch)))
            if points[-1][1] > 1.5 / target:
                break
        h = _interpolate(points, 1.0 / target)
        measured.append(1.0 / step_s(h, batch))
        sizes.append(f"{h}x{batch}")
        grids[str(target)] = points
    return {"sizes": sizes, "measured": measured, "grid": grids}


def _interpolate(points: list[tuple[int, float]], period: float) -> int:
    """The hidden width whose step time is ``period``, interpolated in log-log space."""
    pts = sorted(points)
    if period <= pts[0][1]:
        return pts[0][0]  # even the smallest model is slower than the target: as fast as it gets
    for (h0, t0), (h1, t1) in zip(pts, pts[1:], strict=False):
        if t0 <= period <= t1 and t1 > t0:
            f = (math.log(period) - math.log(t0)) / (math.log(t1) - math.log(t0))
            return int(round(math.exp(math.log(h0) + f * (math.log(h1) - math.log(h0))) / 8) * 8)
    return pts[-1][0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=DEFAULT_SIZES, help="HIDDENxBATCH, comma-separated")
    ap.add_argument("--warmup-s", type=float, default=0.5)
    ap.add_argument("--measure-s", type=float, default=2.0)
    ap.add_argument("--calibrate", default="", help="target steps/s, comma-separated")
    ap.add_argument("--toggle", action="store_true", help="in-process probe on/off blocks")
    ap.add_argument("--block-s", type=float, default=0.01, help="--toggle: seconds per block")
    ap.add_argument("--by-part", action="store_true", help="--toggle: each part alone, and empty")
    args = ap.parse_args(argv)
    if args.toggle:
        sizes = args.sizes.split(",")
        out = toggle(sizes, args.warmup_s, args.measure_s, args.block_s, args.by_part)
    elif args.calibrate:
        out = calibrate([float(x) for x in args.calibrate.split(",")])
    else:
        sizes = args.sizes.split(",")
        out = measure(sizes, args.warmup_s, args.measure_s)
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
