"""Lay out the autoencoder example with synthetic MNIST-shaped data as it expects it, under argv[1].

The example reads its data from ``<its folder>/../../Datasets`` (Lightning's mocked MNIST when
PL_USE_MOCKED_MNIST is set: ``MNIST/complete/{training,test}.pt``, tuples of uint8 images and
labels) and splits 55000/5000 images. So this copies the unmodified script to
``argv[1]/examples/pytorch/basics/`` and writes 60000 + 10000 random 28x28 images beside it.
"""

import shutil
import sys
from pathlib import Path

import torch


def main(out: Path) -> None:
    script_dir = out / "examples" / "pytorch" / "basics"
    script_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy2(Path(__file__).parent / "autoencoder.py", script_dir / "autoencoder.py")
    data = out / "examples" / "Datasets" / "MNIST" / "complete"
    data.mkdir(parents=True, exist_ok=True)
    gen = torch.Generator().manual_seed(0)
    for name, n in (("training.pt", 60000), ("test.pt", 10000)):
        images = torch.randint(0, 256, (n, 28, 28), dtype=torch.uint8, generator=gen)
        labels = torch.randint(0, 10, (n,), generator=gen)
        torch.save((images, labels), data / name)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
