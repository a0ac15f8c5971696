"""Build synthetic Sessions for analysis tests: no subprocess, exact numbers."""

from __future__ import annotations

from typing import Any

from trainprof.store import gpus, sampled
from trainprof.store.events import ProcessLog
from trainprof.store.session import Samples, Session

DEFAULT_LOADER = {
    "batch_size": 32,
    "num_workers": 2,
    "pin_memory": False,
    "persistent_workers": True,
    "prefetch_factor": 2,
    "sampler": "torch.utils.data.sampler.RandomSampler",
    "batch_sampler": "torch.utils.data.sampler.BatchSampler",
    "sharing_strategy": "file_descriptor",
}


def process(
    n_steps: int,
    step_s: float = 0.1,
    wait_s: float = 0.0,
    batch_size: int = 32,
    fetches: int = 1,
    loader: dict[str, Any] | None = DEFAULT_LOADER,
    role: str = "main",
    pid: int = 1000,
    t0: float = 100.0,
    first_step_s: float = 2.0,
    sampler_s: float = 0.0,
) -> ProcessLog:
    log = ProcessLog({"pid": pid, "role": role, "t0": t0, "version": 1})
    t_us = 0
    for i in range(n_steps):
        dur = first_step_s if i == 0 else step_s
        t_us += int(dur * 1e6)
        log.add_line(
            f"S {t_us} {int(dur * 1e6)} {int(wait_s * 1e6)} {int(sampler_s * 1e6)} {batch_size} {fetches} "
            f"{batch_size * fetches}"
        )
    if loader is not None:
        import json

        log.add_line(f"L 0 {json.dumps(loader)}")
    log.torch_imported_us = 1000
    return log


def samples(rows: list[dict[str, Any]]) -> Samples:
    s = Samples()
    for row in rows:
        s.add(row)
    return s


def session(
    *procs: ProcessLog, sample_rows: list[dict[str, Any]] | None = None, **meta: Any
) -> Session:
    m: dict[str, Any] = {
        "command": ["python", "train.py"],
        "exit_code": 0,
        "t_launch": 99.0,
        "usable_cpus": 4,
    }
    m.update(meta)
    rows = samples(sample_rows or [])
    gpus.select(rows, procs)  # as Session.load does
    # an ``attach`` record: read as Session.load reads it (its stack files: none on disk)
    found = sampled.read(m.get("attach"), "/nonexistent")
    return Session(
        run_dir="/nonexistent", meta=m, processes=list(procs), samples=rows, sampled=found
    )


def loop_spans(
    sess: Session, lines: dict[str, float], t_start: float, t_end: float, period: float = 0.1
) -> None:
    """Fill a session with main-thread stack spans: each period is split between user lines in
    proportion to ``lines`` (source text → share). Frames of a forward pass for "model(x)"."""
    from trainprof.store.stacks import StackSpan

    train = "/home/user/proj/train.py"
    spans = []
    t = t_start
    while t + period <= t_end:
        at = t
        for n, (text, share) in enumerate(lines.items()):
            frames: tuple[tuple[str, str, int], ...] = (
                ("<module>", train, 1),
                ("main", train, 10 + n),
            )
            if text.startswith("model("):
                frames += (
                    ("Module._call_impl", "/venv/site-packages/torch/nn/modules/module.py", 1),
                )
            spans.append(StackSpan(at, at + share * period, frames))
            sess.source[(train, 10 + n)] = text
            at += share * period
        t += period
    sess.spans = spans
