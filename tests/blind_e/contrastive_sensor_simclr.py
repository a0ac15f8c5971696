"""SimCLR-style contrastive pre-training of a 1-D conv encoder on accelerometer windows.

Mistake: `train` still runs the whole loop inside `torch.profiler.profile(...)`, with
`record_shapes=True` and no `schedule`, left from a one-off look at the augmentation
cost. Every op of every step (augmentations, two encoder passes, the NT-Xent loss,
backward, Adam) is recorded with its input shapes, and the trace is written out at the
end.

Expert diagnosis: `profiler-left-on`, in `train`.

Fix (`--fixed`): train without the profiler (or give it a
`schedule(wait=..., warmup=..., active=...)` that records a few steps and stops).

Measured cost: see EXPECTED.md and the line below (median of 3 interleaved
`/usr/bin/time` runs, OMP_NUM_THREADS=1).
6.15 s plain, 3.96 s with `--fixed`: 36 % of the whole run (load 2.2-2.3);
the profiler's event buffers also grow the job by ~1.3 GB (max RSS 1,664 MiB against
355 MiB).
"""

import argparse
import contextlib
import math
import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

WINDOW = 128
AXES = 3


def make_recordings(n, gen):
    """Synthetic 3-axis accelerometer windows from six activities (gait frequencies)."""
    t = torch.arange(WINDOW) / 50.0
    activity = torch.randint(0, 6, (n,), generator=gen)
    freq = (0.5 + 0.4 * activity.float())[:, None, None]
    phase = torch.rand(n, AXES, 1, generator=gen) * 2 * math.pi
    amp = 0.5 + torch.rand(n, AXES, 1, generator=gen)
    x = amp * torch.sin(2 * math.pi * freq * t + phase)
    return x + 0.1 * torch.randn(n, AXES, WINDOW, generator=gen)


def augment(x, gen):
    """Jitter, per-axis scaling, random crop-and-resize, random axis sign flip."""
    n = x.shape[0]
    x = x * (1 + 0.2 * torch.randn(n, AXES, 1, generator=gen))
    x = x + 0.05 * torch.randn(x.shape, generator=gen)
    start = int(torch.randint(0, WINDOW // 4, (1,), generator=gen))
    x = F.interpolate(
        x[:, :, start : start + 3 * WINDOW // 4], size=WINDOW, mode="linear", align_corners=False
    )
    flip = torch.where(torch.rand(n, AXES, 1, generator=gen) < 0.2, -1.0, 1.0)
    return x * flip


class Encoder(nn.Module):
    def __init__(self, d=64, proj=32):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv1d(AXES, 32, 7, padding=3),
            nn.BatchNorm1d(32),
            nn.ReLU(),
            nn.Conv1d(32, 64, 5, padding=2, stride=2),
            nn.BatchNorm1d(64),
            nn.ReLU(),
            nn.Conv1d(64, d, 3, padding=1, stride=2),
            nn.BatchNorm1d(d),
            nn.ReLU(),
            nn.AdaptiveAvgPool1d(1),
            nn.Flatten(),
        )
        self.projector = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, proj))

    def forward(self, x):
        return self.projector(self.backbone(x))


def nt_xent(z1, z2, tau=0.2):
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    sim = z @ z.T / tau
    n = z1.shape[0]
    sim.fill_diagonal_(float("-inf"))
    targets = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)])
    return F.cross_entropy(sim, targets)


def train(model, data, steps, out_dir, profiled, batch=64):
    gen = torch.Generator().manual_seed(1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    prof_ctx = (
        profile(activities=[ProfilerActivity.CPU], record_shapes=True)
        if profiled
        else contextlib.nullcontext()
    )
    with prof_ctx as prof:
        for step in range(steps):
            idx = torch.randint(0, len(data), (batch,), generator=gen)
            x = data[idx]
            loss = nt_xent(model(augment(x, gen)), model(augment(x, gen)))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if prof is not None:
                prof.step()
            if step % 20 == 0:
                print(f"step {step}: loss {loss.item():.3f}", flush=True)
    if prof is not None:
        prof.export_chrome_trace(os.path.join(out_dir, "trace.json"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixed", action="store_true")
    args = ap.parse_args()
    steps = int(os.environ.get("STEPS", "80"))
    torch.manual_seed(0)
    data = make_recordings(4096, torch.Generator().manual_seed(0))
    model = Encoder()
    with tempfile.TemporaryDirectory() as tmp:
        train(model, data, steps, tmp, profiled=not args.fixed)
        torch.save(model.backbone.state_dict(), os.path.join(tmp, "encoder.pt"))


if __name__ == "__main__":
    main()
