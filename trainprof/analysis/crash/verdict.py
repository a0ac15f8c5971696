"""Crashes and hangs: the job's stderr matched against the signature table, with the limits
measured during the run as evidence, and a hang finding when the runner saw the job stop
making progress. Pure."""

from __future__ import annotations

from dataclasses import replace

from trainprof.analysis.crash.context import crash_context
from trainprof.analysis.crash.hang import at_work_finding, hang_finding, pause_finding
from trainprof.analysis.crash.matcher import match_signatures
from trainprof.analysis.crash.still import still_finding
from trainprof.analysis.crash.torchrun import RankError, rank_failed, without_consequences
from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.stop import stop_signal_words
from trainprof.store.session import Session


def crash_findings(session: Session, metrics: Metrics) -> list[Finding]:
    """A failed torchrun rank first (rank-failed), then signature findings (most specific
    first), then the hang finding if the job hung."""
    failed = torchrun_failure(session)  # torchrun: the rank that failed first, its own error
    stderr = session.stderr_tail
    if failed is not None:  # the other ranks' secondary errors are not causes of their own
        stderr = without_consequences(stderr, failed[1])
    found = match_signatures(stderr, crash_context(session, metrics))
    if failed is not None:
        found = [failed[0], *found]
    if metrics.outside is not None and metrics.outside.stillness is not None:
        still = still_finding(metrics.outside.stillness, metrics)  # attach: no runner, no watch
        return found + [still] if still is not None else found
    hang = session.meta.get("hang")
    if not hang:
        return found
    roles = {p.pid: _role(p.role, p.header.get("rank")) for p in session.processes}
    stopped_by = session.meta.get("stopped_by")
    if hang.get("at_work") and stopped_by:  # stopped while at work: where, not a hang
        by = "--timeout" if stopped_by == "timeout" else stop_signal_words(session.meta)
        by = "a Ctrl-C" if by == "Ctrl-C" else by
        return found + [at_work_finding(hang, session.hang_dumps, roles, metrics, stopped_by, by)]
    if not stopped_by and (
        session.meta.get("exit_code") == 0 or metrics.total_steps > (hang.get("steps_before") or 0)
    ):
        # reported, not stopped, and the job went on or ended by itself: a pause, not a hang
        return found + [pause_finding(hang, session.hang_dumps, roles, metrics)]
    verdict = hang_finding(hang, session.hang_dumps, roles, metrics)
    causes = [f for f in found if f.severity == "error"]
    if causes:
        first = causes[0]
        merged = replace(
            first,
            title=first.title + " (the job hung)",
            evidence=first.evidence + verdict.evidence,
        )
        found = [merged] + [f for f in found if f is not first]
    return found + [verdict]


def _role(role: str, rank: object) -> str:
    """A process's role as the hang verdict names it: "rank N" for a rank of a distributed job."""
    return f"rank {rank}" if role == "rank" and isinstance(rank, int) else role


def torchrun_failure(session: Session) -> tuple[Finding, int] | None:
    """rank-failed for a torchrun job, from its output and each rank's recorded exception."""
    recorded: dict[int, RankError] = {}
    ended: dict[int, int] = {}  # ranks whose exit handlers ran: steps recorded
    for p in session.processes:
        rank = p.header.get("rank")
        if p.role != "rank" or not isinstance(rank, int):
            continue
        if p.reached_exit:
            ended[rank] = p.n_steps
        info = next((i for i in reversed(p.infos) if i.get("exception")), None)
        # torchrun's own agent, when it inherited RANK (a PyTorchJob pod's index), is no rank
        if info is not None and info["exception"] != "ChildFailedError":
            t = info.get("t")
            when = p.t0 + t / 1e6 if isinstance(t, int) else None
            recorded[rank] = RankError(
                rank, str(info["exception"]), str(info.get("message") or ""), when, None
            )
    return rank_failed(session.stderr_tail, session.meta.get("exit_code"), recorded, ended)
