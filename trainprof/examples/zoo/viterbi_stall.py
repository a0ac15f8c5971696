"""CPU stall in a callback: a pure-Python Viterbi decode of held-out sentences every 25 steps.

Reproduces a sequence-tagging job (part-of-speech / NER) built on a small home-grown
``Trainer`` with callbacks, Lightning/HF style. A ``SampleDecodeCallback`` reports held-out
tag accuracy while training: its ``on_step_end`` takes the model's emissions for a fixed
held-out set and runs a Viterbi decode over a tag-transition matrix, written as nested
Python loops over positions and tag pairs. The training steps themselves take a few
milliseconds; every 25th step the callback holds the loop for a few hundred milliseconds, and
over the run the decode costs about as much time as training.

Fix: decode with tensor ops (a vectorised Viterbi: ``(prev[:, :, None] + trans).max(dim=1)``
per position over the whole batch), decode a few sentences rather than the whole set, run the
metric at the end of an epoch, or hand it to a background process.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

VOCAB = 800
TAGS = 32
SEQ_LEN = 40


def make_tagged_corpus(n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Tags follow a sparse Markov chain; each word is drawn from a tag-specific band of ids."""
    trans = torch.rand(TAGS, TAGS, generator=g) ** 6
    trans = trans / trans.sum(dim=1, keepdim=True)
    tags = torch.empty(n, SEQ_LEN, dtype=torch.long)
    tags[:, 0] = torch.randint(0, TAGS, (n,), generator=g)
    for t in range(1, SEQ_LEN):
        tags[:, t] = torch.multinomial(trans[tags[:, t - 1]], 1, generator=g).squeeze(1)
    band = VOCAB // TAGS
    words = tags * band + torch.randint(0, 2 * band, (n, SEQ_LEN), generator=g)
    return words.clamp(max=VOCAB - 1), tags


class Tagger(nn.Module):
    def __init__(self, dim: int = 64):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.conv = nn.Conv1d(dim, dim, 5, padding=2)
        self.emit = nn.Linear(dim, TAGS)

    def forward(self, words: torch.Tensor) -> torch.Tensor:  # (B, T) -> (B, T, TAGS)
        h = self.embed(words)
        h = h + F.relu(self.conv(h.transpose(1, 2))).transpose(1, 2)
        return self.emit(h)


def viterbi(emissions: list[list[float]], log_trans: list[list[float]]) -> list[int]:
    """Most likely tag path for one sentence: O(T * K^2) in plain Python."""
    n_tags = len(log_trans)
    score = list(emissions[0])
    backpointers = []
    for emit in emissions[1:]:
        new_score, pointers = [], []
        for j in range(n_tags):
            best, best_i = float("-inf"), 0
            for i in range(n_tags):
                s = score[i] + log_trans[i][j]
                if s > best:
                    best, best_i = s, i
            new_score.append(best + emit[j])
            pointers.append(best_i)
        score = new_score
        backpointers.append(pointers)
    path = [max(range(n_tags), key=score.__getitem__)]
    for pointers in reversed(backpointers):
        path.append(pointers[path[-1]])
    return path[::-1]


class Callback:
    def on_train_begin(self, trainer: Trainer) -> None:
        pass

    def on_step_end(self, trainer: Trainer, loss: torch.Tensor) -> None:
        pass

    def on_epoch_end(self, trainer: Trainer) -> None:
        pass


class LossLogger(Callback):
    def __init__(self, every: int = 50):
        self.every = every

    def on_step_end(self, trainer: Trainer, loss: torch.Tensor) -> None:
        if trainer.global_step % self.every == 0:
            print(f"step {trainer.global_step}: loss {loss.item():.4f}")


class SampleDecodeCallback(Callback):
    """Viterbi-decodes a fixed held-out set and reports tag accuracy."""

    def __init__(self, words: torch.Tensor, tags: torch.Tensor, every: int = 25):
        self.words, self.tags, self.every = words, tags, every

    def on_train_begin(self, trainer: Trainer) -> None:
        # Transition scores estimated from the training tags (a fixed CRF-style prior).
        tags = trainer.train_tags
        pairs = tags[:, :-1].reshape(-1) * TAGS + tags[:, 1:].reshape(-1)
        counts = torch.bincount(pairs, minlength=TAGS * TAGS).view(TAGS, TAGS) + 1.0
        self.log_trans = (counts / counts.sum(dim=1, keepdim=True)).log().tolist()

    def on_step_end(self, trainer: Trainer, loss: torch.Tensor) -> None:
        if trainer.global_step % self.every != 0:
            return
        trainer.model.eval()
        with torch.no_grad():
            emissions = trainer.model(self.words).log_softmax(dim=-1).tolist()
        trainer.model.train()
        correct = total = 0
        for sentence, gold in zip(emissions, self.tags.tolist(), strict=True):
            path = viterbi(sentence, self.log_trans)
            correct += sum(p == t for p, t in zip(path, gold, strict=True))
            total += len(gold)
        print(f"step {trainer.global_step}: held-out tag accuracy {correct / total:.3f}")


class Trainer:
    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        train_loader: DataLoader,
        callbacks: list[Callback],
        max_steps: int,
    ):
        self.model, self.optimizer, self.train_loader = model, optimizer, train_loader
        self.callbacks, self.max_steps = callbacks, max_steps
        self.train_tags = train_loader.dataset.tensors[1]
        self.global_step = 0

    def training_step(self, words: torch.Tensor, tags: torch.Tensor) -> torch.Tensor:
        logits = self.model(words)
        loss = F.cross_entropy(logits.reshape(-1, TAGS), tags.reshape(-1))
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return loss.detach()

    def fit(self) -> None:
        for callback in self.callbacks:
            callback.on_train_begin(self)
        self.model.train()
        while self.global_step < self.max_steps:
            for words, tags in self.train_loader:
                loss = self.training_step(words, tags)
                self.global_step += 1
                for callback in self.callbacks:
                    callback.on_step_end(self, loss)
                if self.global_step >= self.max_steps:
                    return
            for callback in self.callbacks:
                callback.on_epoch_end(self)


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    words, tags = make_tagged_corpus(1680, g)
    train = TensorDataset(words[:1536], tags[:1536])
    loader = DataLoader(train, batch_size=32, shuffle=True, drop_last=True)
    model = Tagger()
    trainer = Trainer(
        model,
        torch.optim.Adam(model.parameters(), lr=3e-3),
        loader,
        callbacks=[LossLogger(every=50), SampleDecodeCallback(words[1536:], tags[1536:], every=25)],
        max_steps=230,  # ~1.9 s of steady state on a fast CPU (150 gave 1.24 s)
    )
    trainer.fit()


if __name__ == "__main__":
    main()
