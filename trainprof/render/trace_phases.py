"""The ``phases`` track: warm-up, the steady window, saves, evaluations, compiles, stalls, hangs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from trainprof.analysis import attribution, call_sites
from trainprof.analysis.compiles import CompileLog
from trainprof.analysis.loaders import training_loader_keys
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.stalls import Stall
from trainprof.render.console import relative_to
from trainprof.render.trace_events import TID_PHASES, Span, Trace
from trainprof.store.events import ProcessLog
from trainprof.store.session import Session
from trainprof.store.stacks import Frame, StackSpan

CAUSE = {
    "cpu": "CPU work",
    "blocked": "blocked waiting",
    "wait": "waiting for a CPU",
    "compile": "torch.compile compiling",
    "sync": "waiting for the GPU (device→host sync)",
    "data": "waiting for data",
    "eval": "evaluation",
    "checkpoint": "a checkpoint save",
}


def phases(trace: Trace, session: Session, log: ProcessLog, m: Metrics) -> None:
    spans: list[Span] = []
    launched = session.meta.get("t_launch")
    ts = log.steps["t"]
    a = m.activity
    if a.window is not None and isinstance(launched, (int, float)):
        spans.append(
            Span(
                f"warm-up: launch to step {m.warmup_steps - 1} (excluded from the steady state)",
                float(launched),
                a.window[0],
                "phase",
            )
        )
        spans.append(
            Span(
                f"steady state: steps {m.warmup_steps}–{len(ts) - 1}",
                a.window[0],
                a.window[1],
                "phase",
            )
        )
    for seg, size, path in a.saves:
        spans.append(Span("checkpoint save", seg.t0, seg.t1, "save", {"bytes": size, "path": path}))
    for seg in a.evals:
        how = {
            "mode": "eval() … train()",
            "forward": "forward passes only",
            "loader": "another DataLoader",
        }
        spans.append(
            Span("evaluation", seg.t0, seg.t1, "eval", {"seen as": how.get(seg.how, seg.how)})
        )
    rel = relative_to(session.meta.get("cwd"))  # file:line as the report shows it
    spans += _compile_spans(a.compiles, rel)
    for st in a.stalls:
        spans.append(_stall_span(st, list(a.spans), a.loop_funcs, a.step_lines, rel))
    hang, wall = session.meta.get("hang"), session.meta.get("wall_s")
    if isinstance(hang, dict) and len(ts) and isinstance(launched, (int, float)) and wall:
        last = log.t0 + ts[-1] / 1e6
        silent = hang.get("silent_s")
        kind = "at work" if hang.get("at_work") else "hang"
        what = f"no progress for {silent:.0f} s ({kind})" if silent else f"no progress ({kind})"
        spans.append(Span(what, last, float(launched) + float(wall), "hang", dict(hang)))
    trace.spans(trace.pid_of(log), TID_PHASES, spans)
    train_keys = training_loader_keys(log)
    for k, t_iter, first_wait in log.epochs:
        trace.instant(
            trace.pid_of(log),
            TID_PHASES,
            "epoch start" if k in train_keys else f"epoch start (loader {k})",
            log.t0 + t_iter / 1e6,
            {"loader": k, "first_batch_wait_ms": first_wait / 1e3},
        )


def _compile_spans(log: CompileLog | None, rel: Callable[[str], str]) -> list[Span]:
    """Each compile the probe timed, with the line it ran under and Dynamo's reason."""
    if log is None:
        return []
    reasons = {r.compile_id: r.reason for r in log.recompiles}
    out = []
    for c in log.compiles:
        what = "backward, at its first run" if c.trigger == "LAZY_BACKWARD" else "graph"
        args: dict[str, Any] = {"compile id": c.compile_id, "trigger": c.trigger}
        if c.where is not None:
            args["under"] = rel(attribution.where(c.where) or "")
        if c.trigger != "LAZY_BACKWARD" and c.compile_id in reasons:
            args["recompiled because"] = reasons[c.compile_id]
        out.append(
            Span(
                f"torch.compile: {what} {c.compile_id or ''}".rstrip(), c.t0, c.t1, "compile", args
            )
        )
    return out


def _stall_span(
    st: Stall,
    spans: Sequence[StackSpan],
    loop_funcs: frozenset[tuple[str, str]],
    step_lines: frozenset[Frame],
    rel: Callable[[str], str],
) -> Span:
    """``stall: CPU work in refresh_pseudo_labels()``: its cause and what the loop called."""
    site = call_sites.call_site(spans, [(st.t0, st.t1)], loop_funcs, step_lines) if spans else None
    cause = CAUSE.get(st.cause, st.cause)
    args: dict[str, Any] = {
        "step": st.index,
        "cause": st.cause,
        "beyond_median_ms": round(st.excess_s * 1e3, 3),
    }
    if site is None:
        return Span(f"stall: {cause} (step {st.index})", st.t0, st.t1, "stall", args)
    args["where"] = rel(site.where)
    if site.hot_where:
        args["hot line"] = rel(site.hot_where)
    return Span(f"stall: {cause} in {site.called}", st.t0, st.t1, "stall", args)
