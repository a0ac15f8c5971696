"""Blocking upload: every 10 steps the loop POSTs metrics to a tracking server and waits for the reply.

Reproduces the "training is slow, but CPU and GPU are idle" cost of synchronous experiment
tracking: a hand-rolled tracking client (the same shape as a self-hosted MLflow/W&B/Aim
client called synchronously) sends the latest metrics with ``urllib.request.urlopen`` from
inside ``train_one_epoch``, and the request does not return until the server answers. The
server here is a local ``http.server`` thread standing in for a busy or distant tracking
server: it takes 250 ms to acknowledge each POST. The process burns no CPU during that time;
the training loop just sits in ``socket.recv`` waiting for the reply, every 10th step.

Fix: log asynchronously (a background thread with a queue, which is what the real clients do
in their async/offline modes), batch metrics and send them every N seconds rather than every N
steps, or write them locally and sync after the run.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

SERVER_LATENCY_S = 0.25


class SlowTrackingServer(BaseHTTPRequestHandler):
    """Accepts ``POST /api/runs/<id>/metrics`` and acknowledges after a fixed latency."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        json.loads(body)
        time.sleep(SERVER_LATENCY_S)  # queueing + a database write on a busy server
        reply = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: object) -> None:
        pass


class TrackingClient:
    def __init__(self, url: str, run_id: str):
        self.endpoint = f"{url}/api/runs/{run_id}/metrics"

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        payload = json.dumps({"step": step, "metrics": metrics}).encode()
        request = urllib.request.Request(
            self.endpoint, data=payload, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()


class ForecastNet(nn.Module):
    """Predicts the next 8 values of a multivariate series from the previous 64."""

    def __init__(self, channels: int = 8, hidden: int = 64):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv1d(channels, hidden, 5, padding=2),
            nn.ReLU(),
            nn.Conv1d(hidden, hidden, 5, padding=2, stride=2),
            nn.ReLU(),
            nn.AdaptiveAvgPool1d(4),
            nn.Flatten(),
        )
        self.head = nn.Linear(4 * hidden, channels * 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x)).view(x.shape[0], x.shape[1], 8)


def train_one_epoch(
    model: nn.Module,
    loader: DataLoader,
    optimizer: torch.optim.Optimizer,
    tracker: TrackingClient,
    global_step: int,
    log_every: int = 10,
) -> int:
    model.train()
    for history, target in loader:
        loss = nn.functional.mse_loss(model(history), target)
        optimizer.zero_grad()
        loss.backward()
        grad_norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        global_step += 1
        if global_step % log_every == 0:
            tracker.log_metrics(
                {"loss": loss.item(), "grad_norm": grad_norm.item()}, step=global_step
            )
    return global_step


def make_series(n: int, channels: int = 8) -> TensorDataset:
    t = torch.arange(72, dtype=torch.float32)
    freq = 0.05 + 0.3 * torch.rand(n, channels, 1)
    phase = 6.28 * torch.rand(n, channels, 1)
    series = torch.sin(freq * t + phase) + 0.05 * torch.randn(n, channels, 72)
    return TensorDataset(series[:, :, :64], series[:, :, 64:])


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    server = ThreadingHTTPServer(("127.0.0.1", 0), SlowTrackingServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    tracker = TrackingClient(f"http://127.0.0.1:{server.server_port}", run_id="forecast-042")
    try:
        loader = DataLoader(make_series(1600), batch_size=32, shuffle=True, drop_last=True)
        model = ForecastNet()
        optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
        step = 0
        for epoch in range(2):
            started = time.perf_counter()
            step = train_one_epoch(model, loader, optimizer, tracker, step)
            print(f"epoch {epoch}: {step} steps, {time.perf_counter() - started:.2f} s")
    finally:
        server.shutdown()
        server.server_close()


if __name__ == "__main__":
    main()
