"""host-oom: the whole job was SIGKILLed with host memory measured near its limit."""

from __future__ import annotations

from trainprof.analysis.crash.builders.common import make_finding, memory_pressure
from trainprof.analysis.crash.row import Built, Scan
from trainprof.analysis.crash.units import cite, measured_text


def build_host_oom(scan: Scan) -> Built | None:
    ctx = scan.ctx
    signal = (measured_text(ctx.signal) or "").upper()
    code = ctx.exit_code if isinstance(ctx.exit_code, int) else None
    sigkill = code in (137, -9) or signal in ("SIGKILL", "KILL", "9")
    if not sigkill:
        return None
    pressure = memory_pressure(ctx)
    if not pressure.near:
        return None  # SIGKILL far from the limit (or unmeasured) is not evidence of an OOM kill
    evidence = [cite(hit.text) for hit in scan.hits[-2:]]
    status = f"exit code {code}" if code is not None else "killed"
    if signal:
        status += f", signal {signal}"
    evidence.append(f"job {status}: SIGKILL, which is what the kernel OOM killer sends")
    evidence.extend(pressure.evidence)
    fix = [
        "Cut host memory: fewer `num_workers` and `prefetch_factor=1`; load samples lazily or "
        "memory-map them instead of holding the dataset in RAM; keep metadata in numpy arrays "
        "rather than Python lists (each worker copies the objects it touches)",
        "Or raise the limit: Docker `--memory`, Kubernetes `resources.limits.memory`, SLURM `--mem`",
        "Confirm with `dmesg -T | grep -i -E 'killed process|out of memory'`",
    ]
    return (
        make_finding(
            "host-oom",
            "error",
            "The job was killed by the kernel's OOM killer (host memory)",
            evidence,
            fix,
            None,
        ),
        tuple(scan.hits),
    )
