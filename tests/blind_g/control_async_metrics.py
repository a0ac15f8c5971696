"""Healthy control: an MLP regressor on tabular features, its batches from one persistent
DataLoader worker (`prefetch_factor=4`), its metrics sent to a tracking server over HTTP by a
background thread.

The traps: (1) a thread of the job spends most of its time in socket calls, waiting on another
program's reply (a local HTTP server thread stands in for the tracking server, with a few
milliseconds of latency per request), but the training loop never waits for it: it only puts a
dict on a queue. (2) One worker prepares batches ahead of a compute-bound model on 2 CPUs:
the loop does not wait for data, and the worker's CPU is not taken from the loop in a way that
a fix could win back. An expert expects no warning.

`--fixed` is accepted and changes nothing.
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

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

STEPS = int(os.environ.get("STEPS", "200"))


class Ingest(http.server.BaseHTTPRequestHandler):
    received = 0

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Ingest.received += len(json.loads(body))
        time.sleep(0.008)  # network round trip and the server's database write
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


class AsyncTracker:
    """Sends each record on its own request, from a thread: the caller never waits."""

    def __init__(self) -> None:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ingest)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
        self.q: queue.Queue[dict | None] = queue.Queue()
        self.thread = threading.Thread(target=self._send, daemon=True)
        self.thread.start()

    def _send(self) -> None:
        while (item := self.q.get()) is not None:
            self.conn.request(
                "POST", "/log", json.dumps([item]), {"Content-Type": "application/json"}
            )
            self.conn.getresponse().read()

    def log(self, **values: float) -> None:
        self.q.put(values)

    def close(self) -> None:
        self.q.put(None)
        self.thread.join()


class Features(Dataset):
    def __init__(self, n: int) -> None:
        rng = np.random.default_rng(0)
        self.x = rng.standard_normal((n, 64)).astype(np.float32)
        w = rng.standard_normal(64).astype(np.float32)
        self.y = (np.tanh(self.x @ w / 8) + 0.1 * rng.standard_normal(n)).astype(np.float32)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.from_numpy(self.x[i]), torch.tensor(self.y[i])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fixed", action="store_true")  # accepted; changes nothing
    parser.parse_args()
    torch.manual_seed(0)
    loader = DataLoader(
        Features(STEPS * 128),
        batch_size=128,
        shuffle=True,
        num_workers=1,
        persistent_workers=True,
        prefetch_factor=4,
    )
    model = nn.Sequential(
        nn.Linear(64, 768), nn.ReLU(), nn.Linear(768, 768), nn.ReLU(), nn.Linear(768, 1)
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tracker = AsyncTracker()
    for step, (x, y) in enumerate(loader):
        loss = nn.functional.mse_loss(model(x).squeeze(-1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        tracker.log(step=step, loss=loss.item())
    tracker.close()
    print(f"done: loss {loss.item():.4f}, {Ingest.received} records sent")


if __name__ == "__main__":
    main()
