"""CPU stall: every 30 steps a pure-Python ``optimal_sequence_search`` runs inside the loop.

Reproduces the last bottleneck of seed 000 (RSMP-Loc++): training ran smoothly at ~4.5 it/s but
froze at steps 29, 59, ... with the GPU at 0 %, because ``main.py`` periodically called the
CPU-bound ``optimal_sequence_search`` to regenerate pseudo-labels. The search is a dynamic
programme over every video's snippet scores, written in plain Python loops, so the training
loop does nothing else while it runs.

Fix: move the search off the training loop (a background process fed with the scores, or
precompute it between epochs), vectorise it with tensor ops, or run it less often. (The
authors "fixed" it by commenting the call out, which also removed the feature.)
"""

from __future__ import annotations

import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

SNIPPETS = 48
CLASSES = 20


def optimal_sequence_search(
    scores: list[list[float]], min_len: int = 2, max_len: int = 24, penalty: float = 0.5
) -> list[int]:
    """Best segmentation of one video into labelled segments (class per snippet).

    ``scores[t][c]`` is the score of class ``c`` at snippet ``t``. Maximises the summed score of
    each segment's class minus a per-segment penalty, over all segmentations whose segments are
    ``min_len``..``max_len`` snippets long. O(T * max_len * C), in pure Python.
    """
    t_len, n_cls = len(scores), len(scores[0])
    prefix = [[0.0] * (t_len + 1) for _ in range(n_cls)]
    for c in range(n_cls):
        row = prefix[c]
        for t in range(t_len):
            row[t + 1] = row[t] + scores[t][c]
    best = [float("-inf")] * (t_len + 1)
    best[0] = 0.0
    back: list[tuple[int, int]] = [(0, 0)] * (t_len + 1)
    for end in range(1, t_len + 1):
        for length in range(min_len, min(max_len, end) + 1):
            start = end - length
            if best[start] == float("-inf"):
                continue
            for c in range(n_cls):
                value = best[start] + prefix[c][end] - prefix[c][start] - penalty
                if value > best[end]:
                    best[end] = value
                    back[end] = (start, c)
    labels = [0] * t_len
    end = t_len
    while end > 0:
        start, c = back[end]
        for t in range(start, end):
            labels[t] = c
        end = start
    return labels


class SnippetClassifier(nn.Module):
    def __init__(self, dim: int = 64, hidden: int = 128):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv1d(dim, hidden, 3, padding=1),
            nn.ReLU(),
            nn.Conv1d(hidden, hidden, 3, padding=1),
            nn.ReLU(),
            nn.Conv1d(hidden, CLASSES, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, D) -> (B, T, C)
        return self.net(x.transpose(1, 2)).transpose(1, 2)


def refresh_pseudo_labels(model: nn.Module, features: torch.Tensor, out: torch.Tensor) -> None:
    """Regenerates every video's pseudo-labels from the model's current predictions."""
    with torch.no_grad():
        scores = model(features).log_softmax(dim=-1).tolist()
    for video, video_scores in enumerate(scores):
        out[video] = torch.tensor(optimal_sequence_search(video_scores))


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    n_videos, dim = 192, 64
    features = torch.randn(n_videos, SNIPPETS, dim)
    pseudo_labels = torch.randint(0, CLASSES, (n_videos, SNIPPETS))
    video_ids = torch.arange(n_videos)
    loader = DataLoader(TensorDataset(features, video_ids), batch_size=16, shuffle=True)

    model = SnippetClassifier(dim)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    refresh_every, total_steps, step = 30, 210, 0
    last = time.perf_counter()
    while step < total_steps:
        for x, ids in loader:
            model.train()
            logits = model(x)
            loss = criterion(logits.reshape(-1, CLASSES), pseudo_labels[ids].reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step % refresh_every == refresh_every - 1:
                refresh_pseudo_labels(model, features, pseudo_labels)
                now = time.perf_counter()
                print(f"step {step}: loss {loss.item():.4f}, {now - last:.2f} s since last refresh")
                last = now
            if step == total_steps:
                break


if __name__ == "__main__":
    main()
