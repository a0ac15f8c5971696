"""What the GPU tests share: whether CUDA is there, the environment a trainprof run needs on
the lent machine, and keeping each run's report for the check's summary."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, Result


@functools.lru_cache(maxsize=1)
def cuda_devices() -> int:
    """The CUDA devices torch sees, asked once a session (in a child: importing torch here would
    cost every collection a second); 0 at once where no NVIDIA driver is installed."""
    if not os.path.exists("/dev/nvidiactl") and shutil.which("nvidia-smi") is None:
        return 0
    probe = "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout
    return int(out.strip() or 0)


def cuda_available() -> bool:
    return cuda_devices() > 0


def gpu_env() -> dict[str, str]:
    """The environment for a trainprof run: no TRAINPROF_ variables, the repository on an
    absolute PYTHONPATH (the session may run with ``PYTHONPATH=.`` while the job runs in a
    temporary directory), and ``.pyspy/bin`` on PATH when it exists."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINPROF_")}
    paths = [str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    spy_bin = ROOT / ".pyspy" / "bin"
    if spy_bin.is_dir():
        env["PATH"] = f"{spy_bin}{os.pathsep}{env.get('PATH', '')}"
    return env


def keep(name: str, r: Result) -> None:
    """Copy the report (JSON, console text, end of stderr) to $GPU_CHECK_ARTIFACTS, when set."""
    out = os.environ.get("GPU_CHECK_ARTIFACTS")
    if not out:
        return
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    json_path = r.run_dir.with_suffix(".json")
    if json_path.is_file():
        shutil.copyfile(json_path, folder / f"{name}.json")
    (folder / f"{name}.stderr.txt").write_text(r.stderr[-20000:])
    (folder / f"{name}.stdout.txt").write_text(r.stdout[-20000:])  # the console report
