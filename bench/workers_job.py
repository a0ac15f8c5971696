"""A training job whose DataLoader workers keep the CPUs busy: what the own-cost bench runs.

A small convnet trained on synthetic images (``pytorch/examples`` imagenet ``--dummy`` in
miniature): each sample is made in a forked DataLoader worker from a random tensor with a few
CPU-bound augmentations, so with 4 workers on 2 CPUs the job saturates the machine and every
CPU-second trainprof takes is a CPU-second the job loses.

The job times itself: after ``--warmup-s`` it counts steps for ``--measure-s`` and prints one
JSON line, ``{"rates": [{"size": "wN", "steps_per_s": r, "steps": n, "seconds": s,
"cpu_steps_per_s": c}], "startup_s": ...}`` (the shape ``bench/loop.py`` prints), where ``c``
is steps per CPU-second of the job's processes (main and workers) over the same window: CPU the
machine gave to others (trainprof's processes, a neighbour) is not in it, so it isolates what
was added inside the job from what was taken from it.
``--step-times PATH`` also writes the monotonic end time of every measured step to PATH (a JSON
list), and the job says ``measuring`` on stdout as its measured window starts: what the bench's
switched blocks (``bench/workers.py``) read. ``--shared-mib N`` makes the parent hold an N MiB array that the forked workers read (the
peak-memory test's job: copy-on-write pages that RSS counts once per process).
"""

from __future__ import annotations

import argparse
import json
import os
import time

T_START = time.perf_counter()


def _cpu_s(pids: list[int]) -> float:
    """User and system CPU seconds of these processes so far (from /proc: no psutil)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            continue
    return total / os.sysconf("SC_CLK_TCK")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--image", type=int, default=48, help="side of the square images")
    ap.add_argument("--warmup-s", type=float, default=3.0)
    ap.add_argument("--measure-s", type=float, default=10.0)
    ap.add_argument("--shared-mib", type=int, default=0)
    ap.add_argument("--step-times", default=None, help="write the measured steps' end times here")
    a = ap.parse_args(argv)

    import torch
    from torch.utils.data import DataLoader, Dataset

    torch.set_num_threads(1)
    side = a.image
    shared = None
    if a.shared_mib:
        # real pages (ones, not zeros: never the shared zero page), read by every worker
        shared = torch.ones(a.shared_mib * 2**20 // 8, dtype=torch.float64)

    class Images(Dataset):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return 1 << 20

        def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
            g = torch.Generator().manual_seed(i)
            x = torch.rand(3, side + 8, side + 8, generator=g)
            x = x[:, 4 : 4 + side, 4 : 4 + side]  # a crop
            x = torch.nn.functional.avg_pool2d(x[None], 3, 1, 1)[0]  # a blur
            x = (x - x.mean()) / (x.std() + 1e-6)  # normalise
            if shared is not None:  # touch every page of the parent's array
                x = x + float(shared[::512].sum()) * 0.0
            return x.flip(2) if i % 2 else x, i % 10

    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(4),
        torch.nn.Flatten(),
        torch.nn.Linear(32 * 16, 10),
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    loader = DataLoader(
        Images(),
        batch_size=a.batch,
        shuffle=True,
        num_workers=a.workers,
        persistent_workers=a.workers > 0,
        multiprocessing_context="fork" if a.workers > 0 else None,
    )
    it = iter(loader)

    ends: list[float] = []

    def run(seconds: float, keep: bool = False) -> tuple[int, float]:
        n = 0
        t0 = now = time.perf_counter()
        while now - t0 < seconds or n < 3:
            x, y = next(it)
            opt.zero_grad(set_to_none=True)
            loss_fn(model(x), y).backward()
            opt.step()
            n += 1
            now = time.perf_counter()
            if keep:
                ends.append(time.monotonic())
        return n, now - t0

    run(a.warmup_s)
    startup = time.perf_counter() - T_START
    tree = [os.getpid(), *(w.pid for w in getattr(it, "_workers", []))]
    cpu0 = _cpu_s(tree)
    print("measuring", flush=True)
    n, secs = run(a.measure_s, keep=a.step_times is not None)
    cpu = _cpu_s(tree) - cpu0
    if a.step_times is not None:
        with open(a.step_times, "w") as f:
            json.dump(ends, f)
    rate = {"size": f"w{a.workers}", "steps_per_s": n / secs, "steps": n, "seconds": secs}
    rate["cpu_steps_per_s"] = n / cpu if cpu > 0 else None
    print(json.dumps({"rates": [rate], "startup_s": startup}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
