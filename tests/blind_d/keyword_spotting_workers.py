"""Keyword spotting: a small CNN on log-mel features of 1 s clips, computed in DataLoader workers.

Run with OMP_NUM_THREADS unset: one of the two mistakes is about threads.

Two causes, compounding:

1. input-bound: every clip's ``log_mel`` rebuilds the 64-band mel filterbank with a Python
   loop (~3 ms, ten times the framing and FFT it is for) before it frames the clip, so a
   batch costs more CPU to make than to train on; the loader runs a fixed
   ``NUM_WORKERS = 4`` (copied from a 16-core workstation's config) to make up for it, on a
   2-CPU box. The loop waits for its DataLoader.
2. cpu-starved: the main process keeps torch's default intra-op threads (one per CPU, 2
   here), so every convolution wants both CPUs while the four busy workers hold them: the
   loop's thread is ready to run but waits for a CPU, and its OpenMP team waits for its
   slowest, descheduled thread at every parallel region.

How they compound: four workers cannot make batches faster than two CPUs allow, but they
do take the CPUs away from the training thread's OpenMP team, and the starved, spinning
team in turn burns CPU the workers need, so both sides slow down. Fixing the threads alone
gains nothing (the workers are still the bottleneck, and the loop just waits longer);
fixing the data path alone gains most of it, and the thread fix adds the rest.

Fix (``--fixed``): build the filterbank once in ``__init__``; size the pool from the CPUs
the job may use (``len(os.sched_getaffinity(0)) - 1`` workers, at least 1) and give the
main process ``torch.set_num_threads(1)`` on this box.

What an expert diagnoses first: input-bound, at ``log_mel`` or ``mel_filterbank`` (the
per-clip rebuild) or ``__getitem__``, because fixing it is what buys the time; cpu-starved
is the second cause, in ``train``. The two are close in a profile: measured in-process on
a quiet moment, the loop spent 39 % of its time waiting for batches and its thread spent
38 % of it waiting for a CPU (run-queue time from schedstat); with ``--fixed``, 12 % and
27 % of a loop 2.4 times shorter.

Measured cost (2 CPUs shared with other work, load 2.6-3.7, OMP_NUM_THREADS unset; median
of 3 interleaved /usr/bin/time runs of the whole script): plain 5.59 s, ``--fixed`` 3.58 s
(36 %); the thread fix alone 5.58 s (nothing), the data fix alone (filterbank once, one
worker, default threads) 4.07 s.
"""

import argparse
import math
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

SAMPLE_RATE = 16000
N_FFT = 512
HOP = 160
N_MELS = 64
KEYWORDS = 12
NUM_WORKERS = 4


def hz_to_mel(f):
    return 2595.0 * math.log10(1.0 + f / 700.0)


def mel_to_hz(m):
    return 700.0 * (10 ** (m / 2595.0) - 1.0)


def mel_filterbank(sr=SAMPLE_RATE, n_fft=N_FFT, n_mels=N_MELS):
    n_bins = n_fft // 2 + 1
    lo, hi = hz_to_mel(0.0), hz_to_mel(sr / 2)
    points = [mel_to_hz(lo + (hi - lo) * i / (n_mels + 1)) for i in range(n_mels + 2)]
    bins = [int((n_fft + 1) * p / sr) for p in points]
    fb = np.zeros((n_mels, n_bins), dtype=np.float32)
    for m in range(1, n_mels + 1):
        left, centre, right = bins[m - 1], bins[m], bins[m + 1]
        for k in range(left, centre):
            fb[m - 1, k] = (k - left) / max(centre - left, 1)
        for k in range(centre, right):
            fb[m - 1, k] = (right - k) / max(right - centre, 1)
    # slaney-style area normalisation, per band and per bin
    for m in range(n_mels):
        width = 2.0 / max(points[m + 2] - points[m], 1e-6)
        for k in range(n_bins):
            fb[m, k] *= width
    return fb


def log_mel(clip, fb=None):
    if fb is None:
        fb = mel_filterbank()
    n_frames = 1 + (len(clip) - N_FFT) // HOP
    idx = np.arange(N_FFT)[None, :] + HOP * np.arange(n_frames)[:, None]
    frames = clip[idx] * np.hanning(N_FFT).astype(np.float32)
    power = np.abs(np.fft.rfft(frames, axis=1)) ** 2
    return np.log(power @ fb.T + 1e-6).T.astype(np.float32)


class SpeechCommands(Dataset):
    """Synthetic 1 s clips: a keyword-dependent chirp in noise, stored as int16 PCM."""

    def __init__(self, root, n_clips, cache_filterbank):
        rng = np.random.default_rng(0)
        self.labels = rng.integers(0, KEYWORDS, n_clips)
        t = np.arange(SAMPLE_RATE) / SAMPLE_RATE
        pcm = np.empty((n_clips, SAMPLE_RATE), dtype=np.int16)
        for i, y in enumerate(self.labels):
            f0 = 300 + 150 * y
            wave = np.sin(2 * np.pi * (f0 + 400 * t) * t) + 0.3 * rng.standard_normal(SAMPLE_RATE)
            pcm[i] = (wave * 8000).astype(np.int16)
        self.path = os.path.join(root, "clips.npy")
        np.save(self.path, pcm)
        self.pcm = np.load(self.path, mmap_mode="r")
        self.fb = mel_filterbank() if cache_filterbank else None

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        clip = self.pcm[i].astype(np.float32) / 32768.0
        return torch.from_numpy(log_mel(clip, self.fb)), int(self.labels[i])


class KWSNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 16, 3, padding=1)
        self.c2 = nn.Conv2d(16, 32, 3, padding=1)
        self.head = nn.Linear(32, KEYWORDS)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x.unsqueeze(1))), 2)
        x = F.relu(self.c2(x))
        return self.head(x.mean(dim=(2, 3)))


def train(fixed):
    epochs = int(os.environ.get("EPOCHS", "2"))
    if fixed:
        torch.set_num_threads(1)
        workers = max(1, len(os.sched_getaffinity(0)) - 1)
    else:
        workers = NUM_WORKERS
    with tempfile.TemporaryDirectory() as root:
        ds = SpeechCommands(root, 256, cache_filterbank=fixed)
        loader = DataLoader(
            ds, batch_size=32, shuffle=True, num_workers=workers, persistent_workers=True
        )
        model = KWSNet()
        opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
        for epoch in range(epochs):
            total = 0.0
            for feats, labels in loader:
                loss = F.cross_entropy(model(feats), labels)
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += loss.item()
            print(f"epoch {epoch}: loss {total / len(loader):.4f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fixed", action="store_true", help="correct both mistakes")
    train(ap.parse_args().fixed)
