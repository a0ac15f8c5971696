"""Write synthetic MNIST-shaped data for the autoencoder example into argv[1]/Datasets, in seconds.

The example reads MNIST from ``<its folder>/../../Datasets`` and splits 55000/5000 training
images; with PL_USE_MOCKED_MNIST set, Lightning's mocked MNIST loads
``MNIST/complete/{training,test}.pt`` (tuples of uint8 images and labels) from there instead of
downloading. case.json links ``examples/Datasets`` to ``{data}/Datasets``.
"""

import sys
from pathlib import Path

import torch


def main(out: Path) -> None:
    data = out / "Datasets" / "MNIST" / "complete"
    data.mkdir(parents=True, exist_ok=True)
    gen = torch.Generator().manual_seed(0)
    for name, n in (("training.pt", 60000), ("test.pt", 10000)):
        images = torch.randint(0, 256, (n, 28, 28), dtype=torch.uint8, generator=gen)
        labels = torch.randint(0, 10, (n,), generator=gen)
        torch.save((images, labels), data / name)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
