"""Write a small synthetic citation graph in Cora's format into argv[1].

cora.content: one node a line, "<paper id>\t<1,433 binary word features>\t<class>"; cora.cites:
"<cited id>\t<citing id>". 1,700 nodes (main.py takes 1,200 for test and 400 for validation,
the rest for training), 7 classes, about 18 words and 3 citations a node, as Cora has.
"""

import os
import random
import sys

NODES, WORDS, CLASSES, CITES = 1700, 1433, 7, 5000


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    rng = random.Random(0)
    ids = rng.sample(range(1, 1_200_000), NODES)
    label = {i: rng.randrange(CLASSES) for i in ids}
    # each class favours its own band of words, so the labels can be learned
    band = WORDS // CLASSES
    with open(os.path.join(out, "cora.content"), "w") as f:
        for i in ids:
            c = label[i]
            on = {rng.randrange(c * band, (c + 1) * band) for _ in range(12)}
            on |= {rng.randrange(WORDS) for _ in range(6)}
            bits = "\t".join("1" if w in on else "0" for w in range(WORDS))
            f.write(f"{i}\t{bits}\tclass_{c}\n")
    by_class: dict[int, list[int]] = {}
    for i in ids:
        by_class.setdefault(label[i], []).append(i)
    with open(os.path.join(out, "cora.cites"), "w") as f:
        for _ in range(CITES):
            a = rng.choice(ids)
            b = rng.choice(by_class[label[a]]) if rng.random() < 0.8 else rng.choice(ids)
            f.write(f"{a}\t{b}\n")


if __name__ == "__main__":
    main(sys.argv[1])
