"""Speech-command classifier that reports its metrics to a tracking server with one HTTP POST per
step.

Diagnosis: `push_metrics` sends the step's loss and learning rate to a metrics service
(`http.client`, the way `requests.post` or a tracking client's `log()` does) and waits for the
reply before the next step starts. The service stands in for a remote tracking server: a local
HTTP server thread whose handler takes a few milliseconds, like a round trip to a server on
the network. The training loop's thread sits off-CPU in a socket read every step, while the CPU
that should train the model is idle.

Fix: do not wait on the network in the loop: put the metrics on a queue and let a background
thread send them in batches (or send every N steps, without waiting for the reply). `--fixed`
queues them for a sender thread.

Measured cost (2 CPUs at load 10-11, OMP_NUM_THREADS=1, whole script): plain 56.8 s and
30.9 s, --fixed 34.2 s and 32.3 s: not conclusive under that load; by construction the wait is
at least 400 x 8 ms = 3.2 s. An earlier pair at a lighter load (12 ms latency): 12.0 s against
4.2 s. Details in EXPECTED.md.
"""

from __future__ import annotations

import argparse
import http.client
import http.server
import json
import os
import queue
import threading
import time

import torch
from torch import nn

STEPS = int(os.environ.get("STEPS", "400"))


class MetricsHandler(http.server.BaseHTTPRequestHandler):
    """A tracking server's ingest endpoint: parse, store, acknowledge."""

    store: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.store.extend(json.loads(body))
        time.sleep(0.008)  # the round trip to a remote server, and its database write
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


def start_server() -> int:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), MetricsHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


class Tracker:
    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)

    def push_metrics(self, records: list[dict]) -> None:
        body = json.dumps(records)
        self.conn.request("POST", "/api/metrics", body, {"Content-Type": "application/json"})
        self.conn.getresponse().read()


class BackgroundTracker:
    def __init__(self, port: int) -> None:
        self.q: queue.Queue[dict | None] = queue.Queue()
        self.tracker = Tracker(port)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        batch: list[dict] = []
        while True:
            item = self.q.get()
            if item is not None:
                batch.append(item)
            if batch and (item is None or len(batch) >= 50):
                self.tracker.push_metrics(batch)
                batch = []
            if item is None:
                return

    def log(self, record: dict) -> None:
        self.q.put(record)

    def close(self) -> None:
        self.q.put(None)
        self.thread.join()


class KeywordNet(nn.Module):
    def __init__(self, n_mels: int = 40, n_classes: int = 12) -> None:
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv1d(n_mels, 64, 5, padding=2),
            nn.ReLU(),
            nn.Conv1d(64, 64, 5, padding=2),
            nn.ReLU(),
            nn.AdaptiveAvgPool1d(1),
        )
        self.head = nn.Linear(64, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.conv(x).squeeze(-1))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fixed", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    port = start_server()
    model = KeywordNet()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, STEPS)
    feats = torch.randn(2048, 40, 98)
    labels = torch.randint(0, 12, (2048,))
    sender = BackgroundTracker(port) if args.fixed else None
    tracker = Tracker(port)
    for step in range(STEPS):
        idx = torch.randint(0, 2048, (32,))
        loss = nn.functional.cross_entropy(model(feats[idx]), labels[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        record = {"step": step, "loss": loss.item(), "lr": sched.get_last_lr()[0]}
        if sender is not None:
            sender.log(record)
        else:
            tracker.push_metrics([record])
    if sender is not None:
        sender.close()
    print(f"done: {len(MetricsHandler.store)} records stored, last loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
