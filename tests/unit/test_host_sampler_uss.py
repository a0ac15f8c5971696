"""The host sampler reads USS (a walk of every resident page under the memory-map lock) only
for forked children such as DataLoader workers, whose RSS counts their parent's pages; the
training process itself and exec'd children get RSS alone. Real processes, real /proc."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

from trainprof.collect.samplers.host import HostSampler

FAMILY = """
import os, subprocess, sys, time
if os.fork() == 0:  # a forked worker: the parent's command line
    time.sleep(60)
    os._exit(0)
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # an exec'd child
print("ready", flush=True)
time.sleep(60)
"""


def test_uss_is_read_for_forked_children_only() -> None:
    root = subprocess.Popen([sys.executable, "-c", FAMILY], stdout=subprocess.PIPE, text=True)
    try:
        assert root.stdout is not None and root.stdout.readline().strip() == "ready"
        sampler = HostSampler(root.pid)
        rows: list[dict[str, object]] = []
        deadline = time.monotonic() + 10
        while len(rows) < 3 and time.monotonic() < deadline:  # both children listed
            rows = sampler.sample()["procs"]
        root_cmd = psutil.Process(root.pid).cmdline()
        by_kind: dict[str, dict[str, object]] = {}
        for row in rows:
            pid = int(str(row["pid"]))
            if pid == root.pid:
                by_kind["root"] = row
            else:
                same = psutil.Process(pid).cmdline() == root_cmd
                by_kind["fork" if same else "exec"] = row
        assert set(by_kind) == {"root", "fork", "exec"}, rows
        assert by_kind["fork"]["uss"] is not None
        assert by_kind["root"]["uss"] is None and by_kind["exec"]["uss"] is None
        assert all(row["rss"] for row in rows)
    finally:
        for child in psutil.Process(root.pid).children(recursive=True):
            child.kill()
        root.kill()
        root.wait()
