"""Write a tiny synthetic image-folder dataset (train/ and validation/, 4 classes of PNGs) into argv[1]."""

import random
import sys
from pathlib import Path

from PIL import Image

CLASSES = 4
SIZE = 72


def write(root: Path, per_class: int, rng: random.Random) -> None:
    for c in range(CLASSES):
        folder = root / f"class{c}"
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            # A class-coloured square on noise: learnable, and a real PNG to decode.
            noise = bytes(rng.randrange(256) for _ in range(SIZE * SIZE * 3))
            img = Image.frombytes("RGB", (SIZE, SIZE), noise)
            colour = tuple(255 if (c >> k) & 1 else 0 for k in range(3))
            img.paste(colour, (16, 16, 56, 56))
            img.save(folder / f"{i:04d}.png")


def main(out: Path) -> None:
    rng = random.Random(0)
    write(out / "train", 80, rng)
    write(out / "validation", 40, rng)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
