"""The threshold gates: samples/s, data-wait share, p95 step time, peak memory, GPU utilization."""

from __future__ import annotations

from typing import Any

from trainprof.compare.windows import Spread
from trainprof.gate.result import GateResult
from trainprof.units import fmt_bytes, plural


def no_steady(report: dict[str, Any]) -> str:
    steps = (report.get("summary") or {}).get("steps") or 0
    return f"not measured: no steady state ({plural(steps, 'step')} recorded)"


def samples_gate(report: dict[str, Any], thr: Spread | None, minimum: float) -> GateResult:
    name, limit = "min-samples-per-s", f">= {minimum:g} samples/s"
    if thr is None:
        why = (
            no_steady(report)
            if (report.get("summary") or {}).get("steps_per_s") is None
            else (
                "not measured: the batch size was not recorded (no DataLoader batch with a "
                "leading dimension)"
            )
        )
        return GateResult(name, "not measured", "—", limit, why)
    ok = thr.median >= minimum
    return GateResult(
        name,
        "pass" if ok else "fail",
        f"{thr.median:.1f} samples/s",
        limit,
        f"samples/s {thr.describe()} is {'at or above' if ok else 'below'} {minimum:g}",
    )


def data_wait_gate(report: dict[str, Any], maximum: float) -> GateResult:
    name, limit = "max-data-wait", f"<= {maximum:.0%} of step time"
    summary = report.get("summary") or {}
    value = summary.get("data_wait_frac")
    if value is None:
        why = (
            no_steady(report)
            if summary.get("steps_per_s") is None
            else "not measured: the job iterated no DataLoader"
        )
        return GateResult(name, "not measured", "—", limit, why)
    ok = value <= maximum
    return GateResult(
        name,
        "pass" if ok else "fail",
        f"{value:.0%}",
        limit,
        f"the loop waited for data {value:.1%} of the steady step time "
        f"({'within' if ok else 'more than'} {maximum:.0%})",
    )


def step_p95_gate(report: dict[str, Any], maximum_s: float) -> GateResult:
    name, limit = "max-step-p95", f"<= {_ms(maximum_s)}"
    times = (report.get("summary") or {}).get("step_time_s")
    if not times or times.get("p95") is None:
        return GateResult(name, "not measured", "—", limit, no_steady(report))
    p95 = float(times["p95"])
    ok = p95 <= maximum_s
    return GateResult(
        name,
        "pass" if ok else "fail",
        _ms(p95),
        limit,
        f"steady step time p95 {_ms(p95)} (p50 {_ms(float(times['p50']))}) is "
        f"{'within' if ok else 'above'} {_ms(maximum_s)}",
    )


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds < 10 else f"{seconds:.1f} s"


def peak_rss_gate(report: dict[str, Any], maximum: int) -> GateResult:
    name, limit = "max-peak-rss", f"<= {fmt_bytes(maximum)}"
    value = (report.get("summary") or {}).get("peak_rss_bytes")
    if value is None:
        return GateResult(
            name, "not measured", "—", limit, "not measured: no host memory sample was taken"
        )
    ok = value <= maximum
    basis = ((report.get("summary") or {}).get("peak_memory") or {}).get("basis", "rss")
    shared = " (pages shared with forked workers counted once)" if basis == "pss" else ""
    return GateResult(
        name,
        "pass" if ok else "fail",
        fmt_bytes(value),
        limit,
        f"peak memory of the job and its workers, {basis.upper()}{shared}, {fmt_bytes(value)} is "
        f"{'within' if ok else 'above'} {fmt_bytes(maximum)}",
    )


def gpu_util_gate(report: dict[str, Any], minimum: float) -> GateResult:
    name, limit = "min-gpu-util", f">= {minimum:g}%"
    value = (report.get("summary") or {}).get("gpu_util_mean")
    if value is None:
        # the rules that need the GPU's samples were skipped with why they were missing
        reason = next(
            (
                s.get("reason")
                for s in report.get("skipped") or []
                if str(s.get("reason")).startswith("GPU not measured: ")
            ),
            None,
        )
        why = str(reason).removeprefix("GPU not measured: ") if reason else "no GPU sample"
        return GateResult(name, "not measured", "—", limit, f"GPU not measured: {why}")
    ok = value >= minimum
    return GateResult(
        name,
        "pass" if ok else "fail",
        f"{value:.0f}%",
        limit,
        f"mean GPU utilization {value:.1f}% is {'at or above' if ok else 'below'} {minimum:g}%",
    )
