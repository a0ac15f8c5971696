"""LSTM language model in the style of pytorch/examples' word_language_model/main.py.

Mistake: the hidden state is carried from one BPTT segment to the next without
`repackage_hidden` (the detach was dropped in `train`, and `retain_graph=True` added to
silence the "backward through the graph a second time" error). Each step's graph keeps
every earlier segment's LSTM graph alive: host memory rises step after step, and each
backward walks back to the start of the epoch.

Expert diagnosis: `memory-growth`, in `train` (the loop that carries `hidden`).
Fix (`--fixed`): `hidden = repackage_hidden(hidden)` before each segment, plain
`loss.backward()`.

Measured cost: 5.45 s plain against 1.88 s with `--fixed` (66 % of the whole
script), median of 3 interleaved `/usr/bin/time` runs, OMP_NUM_THREADS=1, 2 shared CPUs.
"""

import argparse
import os
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn

bptt = 20
batch_size = 20
emsize = 64
nhid = 64
nlayers = 1
ntokens = 4000
lr = 20.0
clip = 0.25
steps = int(os.environ.get("STEPS", 40))


class RNNModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.2)
        self.encoder = nn.Embedding(ntokens, emsize)
        self.rnn = nn.LSTM(emsize, nhid, nlayers)
        self.decoder = nn.Linear(nhid, ntokens)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output).view(-1, ntokens)
        return nn.functional.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(nlayers, bsz, nhid), weight.new_zeros(nlayers, bsz, nhid))


def load_corpus(path):
    rng = np.random.default_rng(0)
    # a Zipf-ish token stream stands in for wikitext-2's train.txt
    ids = np.minimum(rng.zipf(1.3, size=(steps + 2) * bptt * batch_size), ntokens) - 1
    np.save(path, ids.astype(np.int64))
    return torch.from_numpy(np.load(path))


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous()


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i):
    seq_len = min(bptt, len(source) - 1 - i)
    return source[i : i + seq_len], source[i + 1 : i + 1 + seq_len].view(-1)


def train(model, train_data, fixed):
    model.train()
    criterion = nn.NLLLoss()
    total_loss = 0.0
    start_time = time.time()
    hidden = model.init_hidden(batch_size)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
        if batch >= steps:
            break
        data, targets = get_batch(train_data, i)
        if fixed:
            hidden = repackage_hidden(hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        if fixed:
            loss.backward()
        else:
            loss.backward(retain_graph=True)
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        total_loss += loss.item()
        if batch % 20 == 0 and batch > 0:
            elapsed = time.time() - start_time
            print(
                f"| {batch:5d} batches | ms/batch {elapsed * 1000 / 20:5.2f} "
                f"| loss {total_loss / 20:5.2f}"
            )
            total_loss = 0.0
            start_time = time.time()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fixed", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(1111)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = load_corpus(os.path.join(tmp, "train.npy"))
        train_data = batchify(corpus, batch_size)
        model = RNNModel()
        train(model, train_data, args.fixed)
        with open(os.path.join(tmp, "model.pt"), "wb") as f:
            torch.save(model.state_dict(), f)


if __name__ == "__main__":
    main()
