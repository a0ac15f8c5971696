"""Image classifier loop in the style of timm's train.py: mixup, label smoothing, an EMA.

Mistake: the hand-written `ModelEma.update` deep-copies the model's `state_dict()` every
step and then walks its items in a Python loop, one small tensor expression per entry
(timm's `ModelEmaV2` does one `torch._foreach_lerp_` under `no_grad`, no copy).

Expert diagnosis: `loop-overhead`, in `ModelEma.update`.
Fix (`--fixed`): `torch._foreach_lerp_` of the EMA's parameters and buffers towards the
model's, no copy.

Measured cost: 7.13 s plain against 5.32 s with `--fixed` (25 % of the whole
script), median of 3 interleaved `/usr/bin/time` runs, OMP_NUM_THREADS=1, 2 shared CPUs.
"""

import argparse
import copy
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

steps = int(os.environ.get("STEPS", 200))
batch_size = 4
num_classes = 10


def block(cin, cout):
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()
    )


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        chans = [3] + [32] * 8 + [64] * 8 + [128] * 8
        layers = []
        for i in range(len(chans) - 1):
            layers.append(block(chans[i], chans[i + 1]))
            if i in (8, 16):
                layers.append(nn.MaxPool2d(2))
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(128, num_classes)

    def forward(self, x):
        return self.head(self.features(x).mean((2, 3)))


class ModelEma:
    def __init__(self, model, decay=0.999, fast=False):
        self.module = copy.deepcopy(model).eval()
        self.decay = decay
        self.fast = fast

    def update(self, model):
        if self.fast:
            with torch.no_grad():
                ema = list(self.module.parameters()) + list(self.module.buffers())
                cur = list(model.parameters()) + list(model.buffers())
                fl = [(e, c) for e, c in zip(ema, cur, strict=True) if e.dtype.is_floating_point]
                torch._foreach_lerp_([e for e, _ in fl], [c for _, c in fl], 1 - self.decay)
            return
        model_sd = copy.deepcopy(model.state_dict())
        ema_sd = self.module.state_dict()
        for k in ema_sd:
            v = model_sd[k].detach()
            if ema_sd[k].dtype.is_floating_point:
                ema_sd[k].copy_(ema_sd[k] * self.decay + (1.0 - self.decay) * v)
            else:
                ema_sd[k].copy_(v)


def mixup(x, y, alpha=0.8):
    lam = float(np.random.beta(alpha, alpha))
    index = torch.randperm(x.size(0))
    target = F.one_hot(y, num_classes).float() * 0.9 + 0.1 / num_classes
    return lam * x + (1 - lam) * x[index], lam * target + (1 - lam) * target[index]


def train_one_epoch(model, ema, optimizer, data, labels):
    model.train()
    for i in range(steps):
        x = data[i * batch_size : (i + 1) * batch_size]
        y = labels[i * batch_size : (i + 1) * batch_size]
        x, target = mixup(x, y)
        loss = torch.sum(-target * F.log_softmax(model(x), dim=-1), dim=-1).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        ema.update(model)
        if i % 50 == 0:
            print(f"step {i} loss {loss.item():.4f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fixed", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(42)
    np.random.seed(42)
    data = torch.randn(steps * batch_size, 3, 8, 8)
    labels = torch.randint(0, num_classes, (steps * batch_size,))
    model = Net()
    ema = ModelEma(model, fast=args.fixed)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    train_one_epoch(model, ema, optimizer, data, labels)


if __name__ == "__main__":
    main()
