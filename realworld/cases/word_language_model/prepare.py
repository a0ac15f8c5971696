"""Write a small synthetic word corpus in Wikitext-2's layout into argv[1].

train.txt, valid.txt and test.txt: lines of space-separated words drawn from a seeded Zipf
distribution over 5,000 words. train.txt holds 70,100 to 70,130 tokens (counting main.py's
<eos> per line), which main.py's batchify (batch size 20) and bptt 35 cut into 101 batches.
"""

import os
import random
import sys

VOCAB = 5000


def words(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    seen: set[str] = set()
    while len(seen) < VOCAB:
        seen.add("".join(rng.choices(letters, k=rng.randint(2, 9))))
    return sorted(seen)


def write(path: str, n_tokens: int, vocab: list[str], weights: list[float], rng: random.Random) -> None:
    lines, count = [], 0
    while count < n_tokens:
        line = rng.choices(vocab, weights, k=rng.randint(5, 29))
        lines.append(" " + " ".join(line) + " \n")
        count += len(line) + 1  # main.py adds <eos> to every line
    with open(path, "w", encoding="utf8") as f:
        f.writelines(lines)


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    rng = random.Random(0)
    vocab = words(rng)
    rng.shuffle(vocab)
    weights = [1.0 / (rank + 1) for rank in range(VOCAB)]
    for name, n in (("train.txt", 70_100), ("valid.txt", 7_000), ("test.txt", 7_000)):
        write(os.path.join(out, name), n, vocab, weights, rng)


if __name__ == "__main__":
    main(sys.argv[1])
