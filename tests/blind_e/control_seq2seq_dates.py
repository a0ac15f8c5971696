"""Healthy control: a small encoder-decoder transformer that normalises written dates.

Task: "march 5, 2021" / "05/03/2021" / "5 mar 21" -> "2021-03-05", character
tokenizer, teacher forcing.

The trap: every 20 steps `show_samples` greedy-decodes four held-out inputs token by
token in a Python loop (11 decoder passes), detokenizes them and prints them, and
`train` calls `loss.item()` every step for a running average. It looks like a
per-N-steps stall plus a per-step sync, but on the CPU `.item()` costs microseconds
and a sample print ~11 ms every 20 steps of ~45 ms: about 1 % (measured in-process,
see EXPECTED.md).

Expert diagnosis: none (healthy).

`--fixed` is accepted and changes nothing.

Measured: see EXPECTED.md and the line below (median of 3 interleaved `/usr/bin/time`
runs, OMP_NUM_THREADS=1).
4.91 s plain, 5.01 s with `--fixed` (same code; load 1.9-2.0).
"""

import argparse
import os
import random
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
SRC_LEN = 20
TGT_LEN = 12  # <bos> + 10 chars + <eos>


class CharTokenizer:
    def __init__(self, alphabet):
        self.itos = ["<pad>", "<bos>", "<eos>"] + sorted(set(alphabet))
        self.stoi = {c: i for i, c in enumerate(self.itos)}

    def encode(self, text, length, bos=False):
        ids = ([1] if bos else []) + [self.stoi[c] for c in text] + [2]
        return ids[:length] + [0] * (length - len(ids))

    def decode(self, ids):
        out = []
        for i in ids:
            if i == 2:
                break
            if i > 2:
                out.append(self.itos[i])
        return "".join(out)


def random_date(rnd):
    y, m, d = rnd.randint(1950, 2049), rnd.randint(1, 12), rnd.randint(1, 28)
    style = rnd.randrange(4)
    if style == 0:
        src = f"{MONTHS[m - 1]} {d}, {y}"
    elif style == 1:
        src = f"{d:02d}/{m:02d}/{y}"
    elif style == 2:
        src = f"{d} {MONTHS[m - 1][:3]} {y % 100:02d}"
    else:
        src = f"{y}.{m}.{d}"
    return src, f"{y:04d}-{m:02d}-{d:02d}"


class DateTranslator(nn.Module):
    def __init__(self, vocab, d=64):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.src_pos = nn.Parameter(torch.randn(SRC_LEN, d) * 0.02)
        self.tgt_pos = nn.Parameter(torch.randn(TGT_LEN, d) * 0.02)
        self.core = nn.Transformer(d, 4, 2, 2, 128, dropout=0.0, batch_first=True)
        self.out = nn.Linear(d, vocab)

    def encode(self, src):
        return self.core.encoder(self.emb(src) + self.src_pos, src_key_padding_mask=src == 0)

    def decode(self, memory, tgt, src):
        n = tgt.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(n)
        h = self.core.decoder(
            self.emb(tgt) + self.tgt_pos[:n],
            memory,
            tgt_mask=mask,
            tgt_is_causal=True,
            memory_key_padding_mask=src == 0,
        )
        return self.out(h)

    def forward(self, src, tgt):
        return self.decode(self.encode(src), tgt, src)


@torch.no_grad()
def show_samples(model, tok, src_texts):
    model.eval()
    src = torch.tensor([tok.encode(s, SRC_LEN) for s in src_texts])
    memory = model.encode(src)
    ys = torch.ones(len(src_texts), 1, dtype=torch.long)
    for _ in range(TGT_LEN - 1):
        nxt = model.decode(memory, ys, src)[:, -1].argmax(dim=-1, keepdim=True)
        ys = torch.cat([ys, nxt], dim=1)
    model.train()
    for s, row in zip(src_texts, ys.tolist(), strict=True):
        print(f"  {s!r:>22} -> {tok.decode(row[1:])}")


def train(model, tok, data, samples, steps, batch=64):
    src_all, tgt_all = data
    opt = torch.optim.Adam(model.parameters(), lr=5e-4)
    running = 0.0
    for step in range(1, steps + 1):
        idx = torch.randint(0, len(src_all), (batch,))
        src, tgt = src_all[idx], tgt_all[idx]
        logits = model(src, tgt[:, :-1])
        loss = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), tgt[:, 1:].reshape(-1), ignore_index=0
        )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        running = 0.98 * running + 0.02 * loss.item()
        if step % 20 == 0:
            print(f"step {step}: loss {running:.3f}", flush=True)
            show_samples(model, tok, samples)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixed", action="store_true")  # accepted; nothing to fix
    ap.parse_args()
    steps = int(os.environ.get("STEPS", "80"))
    torch.manual_seed(0)
    rnd = random.Random(0)
    pairs = [random_date(rnd) for _ in range(8000)]
    tok = CharTokenizer("".join(s + t for s, t in pairs))
    src = torch.tensor([tok.encode(s, SRC_LEN) for s, _ in pairs])
    tgt = torch.tensor([tok.encode(t, TGT_LEN, bos=True) for _, t in pairs])
    samples = [random_date(rnd)[0] for _ in range(4)]
    model = DateTranslator(len(tok.itos))
    train(model, tok, (src, tgt), samples, steps)
    with tempfile.TemporaryDirectory() as tmp:
        torch.save(model.state_dict(), os.path.join(tmp, "dates.pt"))


if __name__ == "__main__":
    main()
