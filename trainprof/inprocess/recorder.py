"""The helper process of the in-process API: samples the host and py-spy's stacks of its caller.

``python -m trainprof.inprocess.recorder RUN_DIR PID [--no-stacks]``. It forks once and the
first process exits, so the recorder is no process of the caller's tree (the sampler counts
that tree as the job). It says ``pid N`` and waits for ``go`` on its standard input (the
caller lets that pid trace it), starts the samplers, says ``ready``, and records until its
standard input closes or the caller is gone; it then writes ``inprocess.json`` (the stacks'
chunks and the samples taken) and says ``done``.
"""

from __future__ import annotations

import os
import select
import sys
from pathlib import Path
from typing import Any

RESULT = "inprocess.json"
POLL_S = 0.25


def main(argv: list[str]) -> int:
    run_dir, pid, stacks = Path(argv[0]), int(argv[1]), "--no-stacks" not in argv[2:]
    if os.fork() > 0:
        os._exit(0)
    os.setsid()
    _say(f"pid {os.getpid()}")
    if sys.stdin.readline().strip() != "go":
        return 0
    from trainprof.collect.samplers.loop import DEFAULT_INTERVAL_S, SamplerLoop
    from trainprof.collect.samplers.stacks import StackRecorder
    from trainprof.store import rundir

    sampler = SamplerLoop(pid, run_dir / rundir.SAMPLES, DEFAULT_INTERVAL_S, adaptive=True)
    sampler.start()
    rec = StackRecorder(pid, run_dir) if stacks else None
    if rec is not None:
        rec.start()
    _say("ready")
    try:
        _record_until_told(pid, rec)
    finally:
        if rec is not None:
            rec.stop()
        sampler.stop()
    result: dict[str, Any] = {"samples": sampler.count}
    if rec is not None:
        result["stacks"] = {
            "chunks": list(rec.chunks),
            "pid": pid,
            "error": rec.error,
            "rate_changes": list(rec.rate_changes),
        }
    rundir.write_json(run_dir / RESULT, result)
    _say("done")
    return 0


def _record_until_told(pid: int, rec: Any) -> None:
    """Until standard input closes (the caller's stop) or the caller is gone."""
    while True:
        readable, _, _ = select.select([sys.stdin], [], [], POLL_S)
        if readable and not os.read(sys.stdin.fileno(), 4096):
            return
        if not _alive(pid):
            return
        if rec is not None:
            rec.poll()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _say(line: str) -> None:
    try:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
