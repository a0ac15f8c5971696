"""Write a small synthetic BSDS300 into argv[1]/dataset, in seconds: what data.py would download.

data.py's ``download_bsd300()`` reads ``dataset/BSDS300/images/{train,test}`` relative to the
working directory and downloads the archive only when that folder is missing; case.json links
``dataset`` to ``{data}/dataset``. The images are JPEGs of BSDS300's size (481x321, some
321x481), smooth random fields with some noise so that the network has something to learn:
100 for training and 50 for testing (BSDS300 has 200 and 100).
"""

import sys
from pathlib import Path

import numpy as np
from PIL import Image

TRAIN, TEST = 100, 50


def _image(rng: np.random.Generator, portrait: bool) -> Image.Image:
    h, w = (481, 321) if portrait else (321, 481)
    coarse = rng.uniform(0, 255, (h // 16 + 2, w // 16 + 2, 3)).astype(np.uint8)
    smooth = Image.fromarray(coarse).resize((w, h), Image.BICUBIC)
    noisy = np.asarray(smooth, dtype=np.float32) + rng.normal(0, 12, (h, w, 3))
    return Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8))


def main(out: Path) -> None:
    rng = np.random.default_rng(0)
    for split, n in (("train", TRAIN), ("test", TEST)):
        folder = out / "dataset" / "BSDS300" / "images" / split
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(n):
            _image(rng, portrait=i % 4 == 3).save(folder / f"{100000 + i}.jpg", quality=90)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
