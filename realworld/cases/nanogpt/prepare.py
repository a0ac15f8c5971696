"""Write a small synthetic character-level dataset for nanoGPT into argv[1].

The same files as nanoGPT's data/shakespeare_char/prepare.py writes (train.bin and val.bin:
uint16 token ids; meta.pkl: the vocabulary), from seeded random words over its 65 characters.
"""

import os
import pickle
import random
import sys

import numpy as np

CHARS = "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def text(n_chars: int, rng: random.Random) -> str:
    words = ["".join(rng.choices(CHARS[13:], k=rng.randint(1, 8))) for _ in range(500)]
    out: list[str] = []
    size = 0
    while size < n_chars:
        line = " ".join(rng.choices(words, k=rng.randint(3, 12))) + rng.choice(".,;:?!") + "\n"
        out.append(line)
        size += len(line)
    return "".join(out)[:n_chars]


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    rng = random.Random(0)
    stoi = {c: i for i, c in enumerate(CHARS)}
    itos = dict(enumerate(CHARS))
    for name, n in (("train.bin", 200_000), ("val.bin", 20_000)):
        ids = np.array([stoi[c] for c in text(n, rng)], dtype=np.uint16)
        ids.tofile(os.path.join(out, name))
    with open(os.path.join(out, "meta.pkl"), "wb") as f:
        pickle.dump({"vocab_size": len(CHARS), "itos": itos, "stoi": stoi}, f)


if __name__ == "__main__":
    main(sys.argv[1])
