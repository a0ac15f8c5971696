"""Character language model (causal convolutions) whose trainer logs every step and checkpoints
every 20 steps, with its metrics history inside the checkpoint.

Two causes, compounding:

1. checkpoint-stall: every 20 steps ``Trainer.save_checkpoint`` writes model, Adam state
   and ``self.history`` with ``torch.save`` and fsyncs it; the loop waits for it.
2. logging-overhead: every step ``Trainer.log_step`` formats the loss, the gradient norm
   the learning rate, the batch's per-position loss and each layer's gradient norm as
   tensors (``f"{loss}"`` goes through ``str(tensor)``) into a logging line written to
   ``train.log``, and appends the step's record, with the tensors themselves
   (``loss.detach()``, the norms, the per-position loss: 11 tensors a step), to
   ``self.history``.

How they compound: the history that the per-step logging fills holds thousands of small
tensors, and every checkpoint pickles all of them (``torch.save`` writes one storage
record per tensor), so each save is slower than the one before: the logging's cost is
paid once per step and again, growing, at every checkpoint.

Fix (``--fixed``): log every 50 steps, with ``loss.item()`` and floats; keep the history as
floats (one ``float`` per metric per logged step); checkpoint model and optimizer every 100
steps with the history as a small list.

What an expert diagnoses first: checkpoint-stall, at ``save_checkpoint`` (the saves'
steps are the long ones, and they grow); logging-overhead is the second cause, at
``log_step``, whose tensor history is what makes each save slower.

Measured cost (2 CPUs shared with other work, load 2.1-2.7, OMP_NUM_THREADS=1; median of
3 interleaved /usr/bin/time runs of the whole script): plain 6.81 s, ``--fixed`` 5.15 s
(24 %). In-process: the 20 saves took 1.26 s, the first 9 ms and the last 206 ms;
the per-step logging 0.51 s; with ``--fixed`` 0.02 s and 0.01 s.
"""

import argparse
import logging
import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 96
SEQ = 64
BATCH = 8


def corpus(n_chars):
    g = torch.Generator().manual_seed(0)
    words = [
        torch.randint(0, VOCAB, (int(k),), generator=g)
        for k in torch.randint(2, 9, (512,), generator=g)
    ]
    picks = torch.randint(0, len(words), (n_chars // 4,), generator=g)
    return torch.cat([words[int(p)] for p in picks])[:n_chars]


class CharCNN(nn.Module):
    """Causal convolutions over character embeddings."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 128)
        self.c1 = nn.Conv1d(128, 128, 5)
        self.c2 = nn.Conv1d(128, 128, 5)
        self.out = nn.Linear(128, VOCAB)

    def forward(self, x):
        h = self.emb(x).transpose(1, 2)
        h = F.relu(self.c1(F.pad(h, (4, 0))))
        h = F.relu(self.c2(F.pad(h, (4, 0))))
        return self.out(h.transpose(1, 2))


class Trainer:
    def __init__(self, root, fixed):
        self.fixed = fixed
        self.root = root
        self.model = CharCNN()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=3e-3)
        self.sched = torch.optim.lr_scheduler.CosineAnnealingLR(self.opt, 1000)
        self.history = []
        self.log = logging.getLogger("lm")
        self.log.setLevel(logging.INFO)
        handler = logging.FileHandler(os.path.join(root, "train.log"))
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        self.log.addHandler(handler)

    def log_step(self, step, loss, token_loss, gnorm):
        lr = torch.tensor(self.sched.get_last_lr()[0])
        if self.fixed:
            if step % 50 == 0:
                loss_f = loss.item()
                self.history.append({"step": step, "loss": loss_f, "grad_norm": gnorm.item()})
                self.log.info(
                    "step %d loss %.4f grad_norm %.3f lr %.2e",
                    step,
                    loss_f,
                    gnorm.item(),
                    lr.item(),
                )
            return
        layer_norms = {name: p.grad.norm() for name, p in self.model.named_parameters()}
        self.history.append(
            {
                "step": step,
                "loss": loss.detach(),
                "grad_norm": gnorm,
                "lr": lr,
                "token_loss": token_loss.detach(),
                "layer_norms": layer_norms,
            }
        )
        self.log.info(
            f"step {step} loss {loss.detach()} grad_norm {gnorm} lr {lr} "
            f"per-position loss {token_loss.detach()} layer grad norms {layer_norms}"
        )

    def save_checkpoint(self, step):
        path = os.path.join(self.root, "last.pt")
        with open(path, "wb") as f:
            torch.save(
                {
                    "step": step,
                    "model": self.model.state_dict(),
                    "optim": self.opt.state_dict(),
                    "sched": self.sched.state_dict(),
                    "history": self.history,
                },
                f,
            )
            f.flush()
            os.fsync(f.fileno())

    def fit(self, data, steps):
        every = 100 if self.fixed else 20
        g = torch.Generator().manual_seed(1)
        for step in range(1, steps + 1):
            starts = torch.randint(0, len(data) - SEQ - 1, (BATCH,), generator=g)
            x = torch.stack([data[s : s + SEQ] for s in starts])
            y = torch.stack([data[s + 1 : s + SEQ + 1] for s in starts])
            logits = self.model(x)
            token_loss = (
                F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1), reduction="none")
                .view(BATCH, SEQ)
                .mean(0)
            )
            loss = token_loss.mean()
            self.opt.zero_grad()
            loss.backward()
            gnorm = nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.opt.step()
            self.sched.step()
            self.log_step(step, loss, token_loss, gnorm)
            if step % every == 0:
                self.save_checkpoint(step)
        print(f"done: {steps} steps, last loss {loss.item():.4f}")


def main(fixed):
    steps = int(os.environ.get("STEPS", "400"))
    with tempfile.TemporaryDirectory() as root:
        Trainer(root, fixed).fit(corpus(200_000), steps)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fixed", action="store_true", help="correct both mistakes")
    main(ap.parse_args().fixed)
