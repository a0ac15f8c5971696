"""Write a small synthetic MNIST in torchvision's raw format into argv[1]/MNIST/raw.

The four idx files torchvision.datasets.MNIST reads (train-images-idx3-ubyte,
train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte; uncompressed, so it
downloads nothing): 6,400 training and 1,000 test images of 28x28, each a digit's class drawn
as a bright bar at a class-given angle over noise, so the network can learn them.
"""

import math
import os
import struct
import sys

import numpy as np


def images(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    labels = rng.integers(0, 10, n).astype(np.uint8)
    yy, xx = np.mgrid[0:28, 0:28] - 13.5
    out = rng.integers(0, 60, (n, 28, 28)).astype(np.float32)
    for c in range(10):
        angle = math.pi * c / 10
        dist = np.abs(xx * math.sin(angle) - yy * math.cos(angle))
        out[labels == c] += 190 * (dist < 2.5)
    return np.clip(out, 0, 255).astype(np.uint8), labels


def write(raw: str, prefix: str, n: int, rng: np.random.Generator) -> None:
    x, y = images(n, rng)
    with open(os.path.join(raw, f"{prefix}-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 2051, n, 28, 28) + x.tobytes())
    with open(os.path.join(raw, f"{prefix}-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 2049, n) + y.tobytes())


def main(out: str) -> None:
    raw = os.path.join(out, "MNIST", "raw")
    os.makedirs(raw, exist_ok=True)
    rng = np.random.default_rng(0)
    write(raw, "train", 6400, rng)
    write(raw, "t10k", 1000, rng)


if __name__ == "__main__":
    main(sys.argv[1])
