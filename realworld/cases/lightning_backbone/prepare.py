"""Write synthetic MNIST-shaped data for the backbone classifier example into argv[1]/Datasets, in seconds.

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
        labels = torch.randint(0, 10, (n,), generator=gen)
        # noise, and a bright band at rows 2*label..2*label+3: a classifier has something to learn
        images = torch.randint(0, 128, (n, 28, 28), dtype=torch.uint8, generator=gen)
        rows = torch.arange(28)
        band = (rows >= 2 * labels[:, None]) & (rows < 2 * labels[:, None] + 4)
        images[band[:, :, None].expand(n, 28, 28)] += 127
        torch.save((images, labels), data / name)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
