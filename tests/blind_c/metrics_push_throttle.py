"""Train a small regression model and push its metrics to a metrics service.

What it does: trains an MLP on a synthetic regression task for ``--steps`` steps and buffers
loss, gradient norm and learning rate. Every ``flush_every`` steps ``MetricsClient.flush``
pushes one request per series to a metrics service (here a local TCP server thread that
acknowledges each request, standing in for the real endpoint).

Mistake: the client, copied from an API wrapper, respects the service's rate limit with
``_throttle``: at most 10 requests a second, enforced by ``time.sleep`` on the caller's
thread. Each flush sends three requests, so the training loop sleeps ~0.2 s every 40 steps.

Expert diagnosis: ``blocking-stall``, at ``MetricsClient._throttle`` (called by ``flush``).

Fix (``--fixed``): send all series in one request per flush (the service's batch form), so
the rate limit is never reached; or flush from a background thread.

Measured cost (2026-11-29, 2 CPUs shared with other jobs, load average 2.0-2.6,
``OMP_NUM_THREADS=1``, median of 3 runs of ``/usr/bin/time``, noisy): plain 5.53 s,
``--fixed`` 4.02 s: the mistake costs 27 % of the plain run's wall time
(which includes ~3 s of torch import and set-up).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import socketserver
import threading
import time
from dataclasses import dataclass, field

import torch
import torch.nn as nn


@dataclass
class Config:
    steps: int = int(os.environ.get("STEPS", "320"))
    batch_size: int = 128
    features: int = 64
    lr: float = 1e-3
    flush_every: int = 40
    max_requests_per_s: float = 10.0
    series: list[str] = field(default_factory=lambda: ["train/loss", "train/grad_norm", "train/lr"])


class _AckHandler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        for line in self.rfile:
            json.loads(line)
            self.wfile.write(b"ok\n")


class MetricsService:
    """A local stand-in for the metrics endpoint: acknowledges each JSON line."""

    def __init__(self) -> None:
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _AckHandler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.server.server_address[:2]
        return str(host), int(port)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class MetricsClient:
    """Buffers points per series and pushes them, one request per series, within a rate limit."""

    def __init__(self, address: tuple[str, int], max_requests_per_s: float) -> None:
        self.sock = socket.create_connection(address)
        self.reader = self.sock.makefile("rb")
        self.min_interval = 1.0 / max_requests_per_s
        self.last_request = 0.0
        self.buffer: dict[str, list[tuple[int, float]]] = {}

    def log(self, step: int, **values: float) -> None:
        for name, value in values.items():
            self.buffer.setdefault(name, []).append((step, value))

    def _throttle(self) -> None:
        wait = self.last_request + self.min_interval - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        self.last_request = time.monotonic()

    def _post(self, series: str, points: list[tuple[int, float]]) -> None:
        self._throttle()
        payload = json.dumps({"series": series, "points": points}).encode() + b"\n"
        self.sock.sendall(payload)
        if self.reader.readline().strip() != b"ok":
            raise RuntimeError(f"metrics service rejected {series}")

    def flush(self, batched: bool = False) -> None:
        buffered, self.buffer = self.buffer, {}
        if batched and buffered:
            self._post(",".join(buffered), [p for points in buffered.values() for p in points])
            return
        for series, points in buffered.items():
            self._post(series, points)

    def close(self) -> None:
        self.flush()
        self.reader.close()
        self.sock.close()


def train(cfg: Config, fixed: bool) -> None:
    torch.manual_seed(0)
    service = MetricsService()
    client = MetricsClient(service.address, cfg.max_requests_per_s)
    w_true = torch.randn(cfg.features, 1)
    model = nn.Sequential(
        nn.Linear(cfg.features, 512), nn.GELU(), nn.Linear(512, 512), nn.GELU(), nn.Linear(512, 1)
    )
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=cfg.steps)
    t0 = time.perf_counter()
    for step in range(1, cfg.steps + 1):
        x = torch.randn(cfg.batch_size, cfg.features)
        y = torch.sin(x @ w_true)
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        client.log(
            step, loss=loss.item(), grad_norm=grad_norm.item(), lr=float(sched.get_last_lr()[0])
        )
        if step % cfg.flush_every == 0:
            client.flush(batched=fixed)
        if step % 100 == 0:
            print(
                f"step {step} loss {loss.item():.4f} ({time.perf_counter() - t0:.1f} s)", flush=True
            )
    client.close()
    service.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=Config.steps)
    parser.add_argument("--fixed", action="store_true", help="one request per flush")
    args = parser.parse_args()
    train(Config(steps=args.steps), fixed=args.fixed)


if __name__ == "__main__":
    main()
