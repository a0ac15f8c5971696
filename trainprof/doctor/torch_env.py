"""torch as the job will see it, probed in a fresh interpreter.

The CLI never imports torch: a broken install (missing CUDA libraries, ABI mismatch) would
crash doctor itself, and importing it costs ~1 s. A subprocess of the same interpreter runs
``PROBE``, prints one JSON line, and a missing or broken torch becomes a finding.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from trainprof.doctor.base import CheckResult, result

AREA = "torch"
MARKER = "TRAINPROF_TORCH_PROBE "
TIMEOUT_S = 60.0

PROBE = r"""
import sys
if sys.path and sys.path[0] in ("", "."):
    del sys.path[0]  # -c puts the cwd first; a ./torch folder must not shadow the install
import json, os, time, warnings
out = {"python": sys.executable}
def emit():
    print(__MARKER__ + json.dumps(out), flush=True)
    os._exit(0)  # skip torch's interpreter teardown: it can cost a few hundred ms
t0 = time.perf_counter()
try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import torch
except BaseException as e:
    missing = isinstance(e, ModuleNotFoundError) and e.name == "torch"
    out.update(state="missing" if missing else "broken", error=type(e).__name__ + ": " + str(e))
    emit()
out.update(state="ok", import_s=round(time.perf_counter() - t0, 3), version=torch.__version__,
           cuda_build=torch.version.cuda, hip_build=getattr(torch.version, "hip", None))
def attempt(key, fn):
    try:
        out[key] = fn()
    except Exception as e:
        out[key + "_error"] = type(e).__name__ + ": " + str(e)
attempt("num_threads", torch.get_num_threads)
import torch.multiprocessing as tmp
attempt("sharing_strategy", tmp.get_sharing_strategy)
attempt("start_method", lambda: tmp.get_start_method(allow_none=True) or tmp.get_context().get_start_method())
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    attempt("cuda_available", torch.cuda.is_available)
out["cuda_warnings"] = [str(w.message).splitlines()[0] for w in caught][:3]
attempt("cudnn", lambda: torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None)
if out.get("cuda_available"):
    attempt("device_count", torch.cuda.device_count)
    attempt("devices", lambda: [[torch.cuda.get_device_name(i), "sm_%d%d" % torch.cuda.get_device_capability(i)] for i in range(torch.cuda.device_count())])
    attempt("arch_list", torch.cuda.get_arch_list)
    attempt("nccl", lambda: ".".join(map(str, torch.cuda.nccl.version())) if torch.distributed.is_nccl_available() else None)
emit()
""".replace("__MARKER__", repr(MARKER))


@dataclass(frozen=True)
class TorchFacts:
    state: Literal["ok", "missing", "broken"]
    python: str
    error: str | None = None
    version: str | None = None
    import_s: float | None = None
    cuda_build: str | None = None
    hip_build: str | None = None
    cuda_available: bool | None = None
    cuda_error: str | None = None
    cuda_warnings: tuple[str, ...] = ()
    device_count: int | None = None
    devices: tuple[tuple[str, str], ...] = ()  # (name, "sm_90")
    arch_list: tuple[str, ...] = ()
    cudnn: int | None = None
    nccl: str | None = None
    num_threads: int | None = None
    sharing_strategy: str | None = None
    start_method: str | None = None


def parse_probe(stdout: str, stderr: str, python: str, returncode: int | None) -> TorchFacts:
    """Facts from the probe's marker line; anything else means the interpreter itself broke."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARKER):
            try:
                d = json.loads(line[len(MARKER) :])
            except ValueError:
                break
            return TorchFacts(
                state=d.get("state", "broken"),
                python=d.get("python") or python,
                error=d.get("error"),
                version=d.get("version"),
                import_s=d.get("import_s"),
                cuda_build=d.get("cuda_build"),
                hip_build=d.get("hip_build"),
                cuda_available=d.get("cuda_available"),
                cuda_error=d.get("cuda_available_error"),
                cuda_warnings=tuple(d.get("cuda_warnings") or ()),
                device_count=d.get("device_count"),
                devices=tuple((str(n), str(c)) for n, c in d.get("devices") or ()),
                arch_list=tuple(d.get("arch_list") or ()),
                cudnn=d.get("cudnn"),
                nccl=d.get("nccl"),
                num_threads=d.get("num_threads"),
                sharing_strategy=d.get("sharing_strategy"),
                start_method=d.get("start_method"),
            )
    tail = [ln for ln in stderr.splitlines() if ln.strip()]
    why = tail[-1].strip() if tail else f"exit status {returncode}"
    return TorchFacts(state="broken", python=python, error=f"probe died: {why[:300]}")


class TorchProbe:
    """The probe subprocess, started at once so torch's import overlaps the other checks."""

    def __init__(
        self,
        python: Sequence[str] = (sys.executable,),
        env: Mapping[str, str] | None = None,
        timeout_s: float = TIMEOUT_S,
    ) -> None:
        self.python = " ".join(python)
        self.timeout_s = timeout_s
        self._error: str | None = None
        self._proc: subprocess.Popen[str] | None = None
        try:
            self._proc = subprocess.Popen(
                [*python, "-c", PROBE],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                errors="replace",
                env=None if env is None else dict(env),
            )
        except OSError as exc:
            self._error = f"cannot start {self.python}: {exc}"

    def result(self) -> TorchFacts:
        if self._proc is None:
            return TorchFacts(state="broken", python=self.python, error=self._error)
        try:
            out, err = self._proc.communicate(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.communicate()
            return TorchFacts(
                state="broken",
                python=self.python,
                error=f"import torch did not finish in {self.timeout_s:g} s",
            )
        return parse_probe(out, err, self.python, self._proc.returncode)


def check_torch(facts: TorchFacts) -> CheckResult:
    """Missing torch is a warning (doctor may run outside the job's env); a broken one fails."""
    if facts.state == "missing":
        return result(
            AREA,
            "warn",
            "torch-missing",
            "torch is not installed for this Python",
            (f"python: {facts.python}", facts.error or "ModuleNotFoundError"),
            (
                "pip install torch  (in the environment the job runs in)",
                "or run trainprof doctor from the job's own environment",
            ),
        )
    if facts.state == "broken":
        return result(
            AREA,
            "fail",
            "torch-missing",
            "torch is installed but fails to import",
            (f"python: {facts.python}", facts.error or "unknown error"),
            (
                f"{facts.python} -c 'import torch'  (shows the full error)",
                "reinstall a torch build that matches this machine: "
                "pip install --force-reinstall torch",
            ),
        )
    build = f"CUDA {facts.cuda_build}" if facts.cuda_build else "CPU-only build"
    if facts.hip_build:
        build = f"ROCm {facts.hip_build}"
    evidence = [
        f"imports in {facts.import_s:.2f} s" if facts.import_s is not None else "imported",
        f"{build}; cuDNN {facts.cudnn or 'n/a'}; NCCL {facts.nccl or 'n/a'}; "
        f"cuda.is_available() {facts.cuda_available}",
        f"threads {facts.num_threads}; sharing strategy {facts.sharing_strategy}; "
        f"start method {facts.start_method}",
    ]
    if facts.start_method == "fork" and facts.cuda_build:
        evidence.append(
            "start method fork: touch CUDA only after creating DataLoader workers, or they fail "
            "with 'Cannot re-initialize CUDA in forked subprocess'"
        )
    elif facts.start_method and facts.start_method != "fork":
        evidence.append(
            f"start method {facts.start_method}: workers re-import the main module; "
            "keep training under if __name__ == '__main__':"
        )
    return result(AREA, "ok", "torch-missing", f"torch {facts.version}", evidence)


def check_launch_blocking(env: Mapping[str, str]) -> CheckResult:
    """CUDA_LAUNCH_BLOCKING=1 serialises every kernel launch: a silent 2-10x slowdown."""
    value = env.get("CUDA_LAUNCH_BLOCKING")
    if value is None or value.strip() in ("", "0"):
        return result(AREA, "ok", "launch-blocking", "CUDA_LAUNCH_BLOCKING not set")
    return result(
        AREA,
        "warn",
        "launch-blocking",
        f"CUDA_LAUNCH_BLOCKING={value}: every CUDA kernel runs synchronously",
        (
            f"CUDA_LAUNCH_BLOCKING={value} in the environment",
            "meant for debugging: the CPU waits for each kernel, typically 2-10x slower",
        ),
        ("unset CUDA_LAUNCH_BLOCKING",),
    )
