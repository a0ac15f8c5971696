"""GPU machine, CPU training: the model and its batches never move to the GPU.

The pattern: a script written (or copied) without ``device = torch.device("cuda")`` and
``.to(device)``, or run in an environment whose torch is a CPU-only wheel. It trains, slowly, on
the CPU's cores while the GPU next to them sits idle; nothing fails, so nothing tells. The loop
itself is healthy: data in memory, batches of 256, no per-step syncs or logging.

Fix: ``model.to(device)`` before building the optimizer, and each batch
``x.to(device, non_blocking=True)`` (with ``DataLoader(..., pin_memory=True)``). Meant for a GPU
machine (trainprof's GPU tests run it on a lent one); on a machine without a GPU it is just a
CPU job, and trainprof has nothing to say.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

SAMPLES = 8192
BATCH = 256
EPOCHS = 10  # 32 steps an epoch: 320 steps, ~10 s on a 16-core host


def main() -> None:
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(SAMPLES, 512), torch.randint(0, 10, (SAMPLES,)))
    loader = DataLoader(data, batch_size=BATCH, shuffle=True, drop_last=True)
    model = nn.Sequential(
        nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10)
    )  # no .to("cuda"): the forgotten line
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for epoch in range(EPOCHS):
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
