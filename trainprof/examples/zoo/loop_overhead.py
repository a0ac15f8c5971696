"""Loop overhead: per-step grad-norm tracking and metric bookkeeping in Python.

Reproduces the "grad norm every step" and per-step monitoring cost from seed 004: after every
``backward()`` the loop computes each parameter's gradient and weight norm (one ``.item()``
per tensor), keeps a history per parameter to derive an adaptive clipping threshold from its
percentiles, tracks update/weight ratios and a histogram per gradient (what
``wandb.watch(model, log="all", log_freq=1)`` does), and updates a confusion matrix and per-class
precision/recall from ``.tolist()`` predictions with Python loops. None of it is printed
every step, but all of it runs every step, and for this small model it costs about as much as
the forward, backward and optimizer step together.

Fix: do the monitoring every N steps (the authors went to 200); when clipping, use one fused
``torch.nn.utils.clip_grad_norm_`` (it returns the total norm) instead of per-parameter
``.item()`` calls; accumulate metrics as tensors (``torch.bincount``) and reduce them rarely.
"""

from __future__ import annotations

import math
from collections import defaultdict, deque

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

CLASSES = 10


class ResidualMLP(nn.Module):
    def __init__(self, dim: int = 48, depth: int = 10):
        super().__init__()
        self.stem = nn.Linear(32, dim)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, dim))
            for _ in range(depth)
        )
        self.head = nn.Linear(dim, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x)
        for block in self.blocks:
            h = h + block(h)
        return self.head(h)


class TrainingMonitor:
    """Everything the loop wants to know about every step."""

    def __init__(self, model: nn.Module, window: int = 200):
        self.model = model
        self.grad_history: dict[str, deque[float]] = defaultdict(lambda: deque(maxlen=window))
        self.grad_stats: dict[str, dict[str, float]] = {}
        self.grad_histograms: dict[str, list[float]] = {}
        self.update_ratio: dict[str, float] = {}
        self.total_norms: deque[float] = deque(maxlen=window)
        self.confusion = [[0] * CLASSES for _ in range(CLASSES)]
        self.per_class: dict[int, tuple[float, float]] = {}

    def gradient_stats(self, lr: float) -> float:
        """Per-parameter gradient statistics and a percentile-based clipping threshold."""
        total_sq = 0.0
        for name, param in self.model.named_parameters():
            if param.grad is None:
                continue
            grad = param.grad
            g = grad.norm().item()
            w = param.detach().norm().item()
            self.grad_stats[name] = {
                "norm": g,
                "mean": grad.mean().item(),
                "std": grad.std().item() if grad.numel() > 1 else 0.0,
                "abs_max": grad.abs().max().item(),
                "zero_frac": (grad == 0).float().mean().item(),
            }
            self.grad_histograms[name] = torch.histc(grad, bins=32).tolist()
            self.grad_history[name].append(g)
            self.update_ratio[name] = lr * g / (w + 1e-12)
            total_sq += g * g
            history = sorted(self.grad_history[name])
            self.grad_stats[name]["p50"] = history[len(history) // 2]
            self.grad_stats[name]["p99"] = history[int(0.99 * (len(history) - 1))]
        self.total_norms.append(math.sqrt(total_sq))
        ranked = sorted(self.total_norms)
        return max(ranked[int(0.9 * (len(ranked) - 1))], 1e-3)

    def classification_stats(self, logits: torch.Tensor, target: torch.Tensor) -> None:
        for p, t in zip(logits.argmax(dim=1).tolist(), target.tolist(), strict=True):
            self.confusion[t][p] += 1
        for c in range(CLASSES):
            tp = self.confusion[c][c]
            predicted = sum(self.confusion[r][c] for r in range(CLASSES))
            actual = sum(self.confusion[c])
            self.per_class[c] = (tp / max(predicted, 1), tp / max(actual, 1))


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    n = 8192
    x = torch.randn(n, 32)
    y = (x[:, :CLASSES] + 0.5 * torch.randn(n, CLASSES)).argmax(dim=1)
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True, drop_last=True)
    model = ResidualMLP()
    lr = 0.05
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, nesterov=True)
    criterion = nn.CrossEntropyLoss()
    monitor = TrainingMonitor(model)

    step = 0
    for epoch in range(3):
        model.train()
        for inputs, target in loader:
            logits = model(inputs)
            loss = criterion(logits, target)
            optimizer.zero_grad()
            loss.backward()
            max_norm = monitor.gradient_stats(lr)
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()
            monitor.classification_stats(logits.detach(), target)
            step += 1
            if step % 100 == 0:
                recall = sum(r for _, r in monitor.per_class.values()) / CLASSES
                print(f"epoch {epoch} step {step}: loss {loss.item():.4f} mean recall {recall:.3f}")


if __name__ == "__main__":
    main()
