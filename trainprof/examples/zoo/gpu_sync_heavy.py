"""GPU-only: per-parameter gradient norms read with ``.item()`` after every optimizer step.

The pattern (seed 004's "log every layer's grad norm", on a GPU): after ``optimizer.step()``
the loop records ``p.grad.norm().item()`` for each of the model's ~200 parameter tensors, to
put per-layer gradient norms in its metrics. Each ``.item()`` is a device→host sync: the first
waits for the whole step to finish, and every one after it launches one tiny kernel and waits
for it, so the GPU sits idle for the few dozen microseconds of each round trip, ~200 times a
step, with nothing queued. The model itself (a deep residual MLP, bf16 autocast, data already
on the GPU) would keep the GPU busy; the syncs leave it idle a large share of every step.

Fix: keep the numbers on the device and read them rarely, e.g. every 50 steps
``torch.stack(torch._foreach_norm(grads)).tolist()`` (one sync), or accumulate on the device
and call ``.item()`` at logging time. ``torch.cuda.set_sync_debug_mode("warn")`` finds the
syncs. Needs CUDA: trainprof's GPU tests run it on a lent GPU machine.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

ROWS = 32768
FEATURES = 256
WIDTH = 1024
DEPTH = 32  # 6 parameter tensors a block: ~200 in all
BATCH = 2048
EPOCHS = 20  # 16 steps an epoch: 320 steps
CLASSES = 100


class Block(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


def main() -> None:
    device = torch.device("cuda")
    torch.manual_seed(0)
    g = torch.Generator(device=device).manual_seed(0)
    features = torch.randn(ROWS, FEATURES, device=device, generator=g)  # preloaded
    labels = torch.randint(0, CLASSES, (ROWS,), device=device, generator=g)
    loader = DataLoader(
        range(ROWS),
        batch_size=BATCH,
        shuffle=True,
        drop_last=True,
        pin_memory=True,
        generator=torch.Generator().manual_seed(0),
    )
    model = nn.Sequential(
        nn.Linear(FEATURES, WIDTH),
        *[Block(WIDTH) for _ in range(DEPTH)],
        nn.LayerNorm(WIDTH),
        nn.Linear(WIDTH, CLASSES),
    ).to(device)
    named = list(model.named_parameters())
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    metrics: dict[str, float] = {}
    step = 0
    for _epoch in range(EPOCHS):
        for idx in loader:
            idx = idx.to(device, non_blocking=True)
            x, y = features[idx], labels[idx]
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            # Per-layer gradient norms for the metrics: one device→host sync per tensor.
            metrics.update({f"grad_norm/{n}": p.grad.norm().item() for n, p in named})
            step += 1
            if step % 80 == 0:
                worst = max(metrics, key=metrics.__getitem__)
                print(f"step {step}: largest grad norm {worst} = {metrics[worst]:.3f}")


if __name__ == "__main__":
    main()
