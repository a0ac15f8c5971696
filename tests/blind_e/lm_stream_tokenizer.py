"""Small transformer language model trained from a streamed, tokenized text corpus.

Mistake: `TokenStream` is an `IterableDataset` that reads the corpus file, tokenizes
each line and packs the tokens into 64-token blocks; the DataLoader runs it in two
workers (`num_workers=2`) to keep tokenization off the training loop. But
`TokenStream.__iter__` never asks `get_worker_info()` which worker it is, so each
worker streams the whole corpus: every block arrives twice, and an "epoch" is two
epochs of optimizer steps (and the model sees duplicated batches).

Expert diagnosis: `iterable-unsplit`, in `TokenStream.__iter__`.

Fix (`--fixed`): `__iter__` takes every `num_workers`-th line, starting at its worker
id, so the two workers share the corpus between them.

Measured cost: see EXPECTED.md and the line below (median of 3 interleaved
`/usr/bin/time` runs, OMP_NUM_THREADS=1).
5.78 s plain, 4.27 s with `--fixed`: 26 % of the whole run, 64 steps an epoch
instead of 32 (load 2.6-2.8).
"""

import argparse
import math
import os
import re
import tempfile
from collections import Counter

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

BLOCK = 64
WORDS = (
    "the a model data train loss step batch token layer weight gradient learning rate "
    "epoch value small large fast slow graph audio signal noise vector matrix sample "
    "random shuffle update check save load read write cache stream worker"
).split()


class Tokenizer:
    """Word-level vocabulary with a character fallback for unknown words."""

    def __init__(self, lines, vocab_size=512):
        counts = Counter(w for line in lines for w in re.findall(r"\w+|[^\w\s]", line.lower()))
        chars = sorted({c for line in lines for c in line.lower()})
        specials = ["<pad>", "<eos>", "<unk>"]
        self.itos = specials + chars + [w for w, _ in counts.most_common(vocab_size)]
        self.stoi = {s: i for i, s in enumerate(self.itos)}

    def encode(self, line):
        ids = []
        for w in re.findall(r"\w+|[^\w\s]", line.lower()):
            if w in self.stoi:
                ids.append(self.stoi[w])
            else:
                ids.extend(self.stoi.get(c, 2) for c in w)
        ids.append(1)
        return ids

    def __len__(self):
        return len(self.itos)


class TokenStream(IterableDataset):
    def __init__(self, path, tokenizer, split_by_worker):
        self.path = path
        self.tokenizer = tokenizer
        self.split_by_worker = split_by_worker

    def __iter__(self):
        worker_id, num_workers = 0, 1
        if self.split_by_worker:
            info = get_worker_info()
            if info is not None:
                worker_id, num_workers = info.id, info.num_workers
        buf = []
        with open(self.path) as f:
            for i, line in enumerate(f):
                if i % num_workers != worker_id:
                    continue
                buf.extend(self.tokenizer.encode(line))
                while len(buf) > BLOCK:
                    yield torch.tensor(buf[: BLOCK + 1])
                    buf = buf[BLOCK:]


class TinyLM(nn.Module):
    def __init__(self, vocab, d=96, layers=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(BLOCK, d) * 0.02)
        layer = nn.TransformerEncoderLayer(
            d, 4, 4 * d, dropout=0.0, batch_first=True, norm_first=True
        )
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.out = nn.Linear(d, vocab)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(BLOCK))

    def forward(self, x):
        h = self.emb(x) + self.pos[: x.shape[1]]
        return self.out(self.blocks(h, mask=self.mask, is_causal=True))


def write_corpus(path, rng, n_lines=2400):
    with open(path, "w") as f:
        for _ in range(n_lines):
            n = rng.integers(6, 18)
            words = [
                WORDS[j] if rng.random() > 0.05 else "xq" + str(rng.integers(100))
                for j in (rng.zipf(1.4, n) % len(WORDS))
            ]
            f.write(" ".join(words) + (" ." if rng.random() < 0.7 else " ,") + "\n")


def train(model, loader, epochs):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for epoch in range(epochs):
        total, steps = 0.0, 0
        for blocks in loader:
            x, y = blocks[:, :-1], blocks[:, 1:]
            loss = F.cross_entropy(model(x).reshape(-1, model.out.out_features), y.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            total += loss.detach()
            steps += 1
        print(f"epoch {epoch}: {steps} steps, ppl {math.exp(float(total) / steps):.1f}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixed", action="store_true")
    args = ap.parse_args()
    epochs = int(os.environ.get("EPOCHS", "2"))
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "corpus.txt")
        write_corpus(path, rng)
        with open(path) as f:
            tok = Tokenizer(f.readlines())
        ds = TokenStream(path, tok, split_by_worker=args.fixed)
        loader = DataLoader(ds, batch_size=16, num_workers=2)
        model = TinyLM(len(tok))
        train(model, loader, epochs)
        torch.save(model.state_dict(), os.path.join(tmp, "lm.pt"))


if __name__ == "__main__":
    main()
