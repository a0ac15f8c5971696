"""Keyword-spotting trainer whose dataset computes each clip's log-mel spectrogram in `__getitem__`.

Expert diagnosis: input-bound. `SpeechCommandsLike.__getitem__` frames one 1 s waveform,
runs a numpy FFT over it, builds the mel filterbank and takes the log, for every sample of
every batch, and the DataLoader has `num_workers=0`, so all of that runs in the training
process between steps while the small CNN waits.

Fix (`--fixed`): the features are deterministic (no augmentation), so compute them once and
keep them (`cache_features=True`: one pass in `__init__`, then `__getitem__` is an index);
with random augmentation the fix would be DataLoader workers on a machine with spare cores.

Measured on 2026-11-29 with `OMP_NUM_THREADS=1` on a 2-core machine shared with other jobs
(load average ~2.5; one run each, so expect noise), 6 epochs of 24 steps, process wall
time: plain 10.4 s (8.8 s by the script's timer), `--fixed` 5.0 s (3.5 s, the one-off
feature pass included): the per-sample feature extraction costs about 2.5x.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset


@dataclass
class AudioConfig:
    sample_rate: int = 16000
    n_fft: int = 1024
    hop: int = 128
    n_mels: int = 64


@dataclass
class TrainConfig:
    num_clips: int = 24 * 32
    num_keywords: int = 12
    batch_size: int = 32
    epochs: int = 6
    lr: float = 1e-3
    cache_features: bool = False


def mel_filterbank(cfg: AudioConfig) -> np.ndarray:
    def hz_to_mel(f):
        return 2595.0 * np.log10(1.0 + f / 700.0)

    def mel_to_hz(m):
        return 700.0 * (10 ** (m / 2595.0) - 1.0)

    mels = np.linspace(hz_to_mel(0.0), hz_to_mel(cfg.sample_rate / 2), cfg.n_mels + 2)
    bins = np.floor((cfg.n_fft + 1) * mel_to_hz(mels) / cfg.sample_rate).astype(int)
    fb = np.zeros((cfg.n_mels, cfg.n_fft // 2 + 1), dtype=np.float32)
    for m in range(1, cfg.n_mels + 1):
        lo, c, hi = bins[m - 1], bins[m], bins[m + 1]
        for k in range(lo, c):
            fb[m - 1, k] = (k - lo) / max(c - lo, 1)
        for k in range(c, hi):
            fb[m - 1, k] = (hi - k) / max(hi - c, 1)
    return fb


def log_mel(wave: np.ndarray, cfg: AudioConfig) -> np.ndarray:
    """Log-mel spectrogram (n_mels, frames) of one waveform."""
    window = np.hanning(cfg.n_fft).astype(np.float32)
    n_frames = 1 + (len(wave) - cfg.n_fft) // cfg.hop
    frames = np.stack(
        [wave[i * cfg.hop : i * cfg.hop + cfg.n_fft] * window for i in range(n_frames)]
    )
    power = np.abs(np.fft.rfft(frames, axis=1)) ** 2
    return np.log(power @ mel_filterbank(cfg).T + 1e-6).T.astype(np.float32)


class SpeechCommandsLike(Dataset):
    """Synthetic 1 s clips: a keyword is a chirp at a keyword-specific pitch, plus noise."""

    def __init__(self, cfg: TrainConfig, audio: AudioConfig) -> None:
        rng = np.random.default_rng(0)
        self.audio = audio
        self.labels = rng.integers(0, cfg.num_keywords, cfg.num_clips)
        self.seeds = rng.integers(0, 2**31, cfg.num_clips)
        self.cache: list[torch.Tensor] | None = None
        if cfg.cache_features:
            self.cache = [self.features(i) for i in range(len(self.labels))]

    def __len__(self) -> int:
        return len(self.labels)

    def load_clip(self, i: int) -> np.ndarray:
        rng = np.random.default_rng(int(self.seeds[i]))
        t = np.arange(self.audio.sample_rate, dtype=np.float32) / self.audio.sample_rate
        f0 = 200.0 + 60.0 * float(self.labels[i])
        wave = np.sin(2 * math.pi * f0 * t * (1 + 0.3 * t)) + 0.3 * rng.standard_normal(t.shape)
        return wave.astype(np.float32)

    def features(self, i: int) -> torch.Tensor:
        return torch.from_numpy(log_mel(self.load_clip(i), self.audio))

    def __getitem__(self, i: int):
        if self.cache is not None:
            return self.cache[i], int(self.labels[i])
        return self.features(i), int(self.labels[i])


class KWSNet(nn.Module):
    def __init__(self, audio: AudioConfig, num_keywords: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv1d(audio.n_mels, 64, 5, padding=2),
            nn.ReLU(),
            nn.Conv1d(64, 64, 5, padding=2, stride=2),
            nn.ReLU(),
            nn.AdaptiveAvgPool1d(1),
            nn.Flatten(),
            nn.Linear(64, num_keywords),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def train(cfg: TrainConfig) -> None:
    audio = AudioConfig()
    ds = SpeechCommandsLike(cfg, audio)
    loader = DataLoader(ds, batch_size=cfg.batch_size, shuffle=True, num_workers=0)
    model = KWSNet(audio, cfg.num_keywords)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    for epoch in range(cfg.epochs):
        model.train()
        correct, seen = 0, 0
        for x, y in loader:
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            correct += int((logits.argmax(1) == y).sum())
            seen += len(y)
        print(f"epoch {epoch} train acc {correct / seen:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=int(os.environ.get("EPOCHS", 6)))
    parser.add_argument("--fixed", action="store_true", help="compute the features once")
    args = parser.parse_args()
    torch.manual_seed(0)
    t0 = time.perf_counter()
    train(TrainConfig(epochs=args.epochs, cache_features=args.fixed))
    print(f"total {time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    main()
