"""`trainprof run -- torchrun ...` on CPU (gloo): ranks are seen, rank 0's stacks are sampled
(not the launcher's), and a rank with a slow input pipeline is named."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from conftest import run_trainprof, write_script

DDP_JOB = """
import os, time, torch, torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

class Shard(TensorDataset):
    def __getitem__(self, i):
        if os.environ["RANK"] == "1":
            time.sleep(0.002)  # this rank reads from a slower disk
        return super().__getitem__(i)

def main():
    dist.init_process_group("gloo")
    torch.set_num_threads(1)
    data = Shard(torch.randn(2048, 32), torch.randint(0, 4, (2048,)))
    loader = DataLoader(data, batch_size=16, sampler=DistributedSampler(data))
    model = nn.parallel.DistributedDataParallel(nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    dist.destroy_process_group()

if __name__ == "__main__":
    main()
"""


def test_torchrun_ranks_and_straggler(tmp_path: Path) -> None:
    script = write_script(tmp_path, "ddp_train.py", DDP_JOB)
    torchrun = str(Path(sys.executable).parent / "torchrun")
    r = run_trainprof(tmp_path, "--", torchrun, "--nproc-per-node", "2", str(script), timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.report["summary"]["steps"] == 64
    assert "straggler-rank" in r.problems
    straggler = next(f for f in r.report["findings"] if f["id"] == "straggler-rank")
    assert straggler["title"].startswith("Rank 1")
    meta = json.loads((r.run_dir / "run.json").read_text())
    headers = [
        json.loads(p.read_text().split("\n", 1)[0][5:]) for p in r.run_dir.glob("events-*.tp")
    ]
    rank0 = next(h["pid"] for h in headers if h.get("rank") == 0)
    assert meta["stacks"]["pid"] == rank0
