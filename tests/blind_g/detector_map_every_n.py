"""Tiny single-box detector (a regression head on a convnet) that computes a COCO-style training
mAP in pure Python every 20 steps, over the last 2,048 predictions.

Diagnosis: `mean_average_precision` computes each prediction's IoU with the `box_iou` Python
function at 10 IoU thresholds, and `interpolated_ap` takes COCO's 101-point interpolated
precision with a Python list comprehension over the whole precision/recall list for each
recall point. Every 20th step the loop stops for it (a pure-Python CPU stall, no waiting);
the steps in between are ordinary.

Fix: vectorise it (`torchvision.ops.box_iou`, a cumulative max over the precision array, a
`searchsorted` for the recall points), or use a library's implementation, or compute it less
often; `--fixed` computes the same mAP with tensor ops (the same numbers, to rounding).

Measured cost (2 CPUs at load 12, OMP_NUM_THREADS=1): CPU time 5.5 s against 5.3 s (-4 %),
wall 23.1 s against 17.5 s: small; a periodic stall, 10 calls a run.
"""

from __future__ import annotations

import argparse
import collections
import os

import torch
from torch import nn

STEPS = int(os.environ.get("STEPS", "200"))
EVERY = 20
KEEP = 2048  # the last 128 batches' predictions


def box_iou(a: list[float], b: list[float]) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def interpolated_ap(hits: list[bool], n_gt: int) -> float:
    precision, recall, tp = [], [], 0
    for k, hit in enumerate(hits, 1):
        tp += hit
        precision.append(tp / k)
        recall.append(tp / max(n_gt, 1))
    total = 0.0
    for r in [i / 100 for i in range(101)]:  # COCO's 101 recall points
        total += max([p for p, rc in zip(precision, recall, strict=True) if rc >= r], default=0.0)
    return total / 101


def mean_average_precision(preds: list[tuple[float, list[float], list[float]]]) -> float:
    order = sorted(preds, key=lambda p: -p[0])
    aps = []
    for thr in [0.5 + 0.05 * i for i in range(10)]:
        hits = [box_iou(box, gt) >= thr for _score, box, gt in order]
        aps.append(interpolated_ap(hits, len(order)))
    return sum(aps) / len(aps)


def mean_average_precision_torch(
    preds: torch.Tensor, scores: torch.Tensor, gts: torch.Tensor
) -> float:
    order = scores.argsort(descending=True)
    p, g = preds[order], gts[order]
    lt, rb = torch.maximum(p[:, :2], g[:, :2]), torch.minimum(p[:, 2:], g[:, 2:])
    inter = (rb - lt).clamp_min(0).prod(1)
    area = lambda b: (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])  # noqa: E731
    iou = inter / (area(p) + area(g) - inter)
    points = torch.linspace(0, 1, 101)
    aps = []
    for thr in [0.5 + 0.05 * i for i in range(10)]:
        hits = (iou >= thr).double()
        tp = hits.cumsum(0)
        precision = tp / torch.arange(1, len(hits) + 1)
        recall = tp / len(hits)
        # the best precision at recall >= r: a running max from the end
        best = precision.flip(0).cummax(0).values.flip(0)
        idx = torch.searchsorted(recall, points)
        aps.append(torch.where(idx < len(best), best[idx.clamp_max(len(best) - 1)], 0.0).mean())
    return float(torch.stack(aps).mean())


def make_batch(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    xy = torch.rand(n, 2) * 0.6
    wh = torch.rand(n, 2) * 0.3 + 0.1
    boxes = torch.cat([xy, xy + wh], 1)
    img = torch.rand(n, 3, 48, 48) * 0.2
    for i, (x0, y0, x1, y1) in enumerate((boxes * 48).long().tolist()):
        img[i, :, y0:y1, x0:x1] += 0.8
    return img, boxes


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fixed", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 12 * 12, 64),
        nn.ReLU(),
        nn.Linear(64, 5),
    )
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    preds: collections.deque = collections.deque(maxlen=KEEP)
    window: collections.deque = collections.deque(maxlen=KEEP // 16)
    for step in range(STEPS):
        img, boxes = make_batch(16)
        out = model(img)
        loss = nn.functional.smooth_l1_loss(out[:, :4].sigmoid(), boxes)
        opt.zero_grad()
        loss.backward()
        opt.step()
        pred_boxes, conf = out[:, :4].detach().sigmoid(), out[:, 4].detach()
        if args.fixed:
            window.append((pred_boxes, conf, boxes))
        else:
            for b, c, g in zip(pred_boxes.tolist(), conf.tolist(), boxes.tolist(), strict=True):
                preds.append((c, b, g))
        if (step + 1) % EVERY == 0:
            if args.fixed:
                p, s, g = (torch.cat(t) for t in zip(*window, strict=True))
                m = mean_average_precision_torch(p, s, g)
            else:
                m = mean_average_precision(list(preds))
            print(f"step {step + 1} loss {loss.item():.4f} mAP {m:.3f}", flush=True)


if __name__ == "__main__":
    main()
