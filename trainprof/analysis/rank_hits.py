"""Every rule judged on each rank of a torchrun job, not only on the primary rank: which ranks
each finding hit, and the findings of other ranks only."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from trainprof.analysis.findings import Finding, Verdict, rank
from trainprof.analysis.ranks import RankView, span_text
from trainprof.analysis.rules import REGISTRY
from trainprof.store.events import ProcessLog
from trainprof.store.session import Session

Judge = Callable[[Session], Sequence[Finding]]  # one rank's session → the findings of its rules


def with_rank_hits(
    session: Session, ranks: Sequence[RankView], verdict: Verdict, judge: Judge
) -> Verdict:
    """Every rule judged (by ``judge``) on every rank's own steps, not only the primary rank's: each finding
    says which ranks it hit, and a finding of other ranks only is added for them.

    A rank's own judgement sees its steps, loader and exception, not its stacks (the other
    ranks' stacks are sampled thinner, to name a straggler's work), so rules that need stack
    samples judge the primary rank only.
    Crash, hang and straggler findings are about the job and are left as they are."""
    if len(ranks) < 2:
        return verdict
    primary = next((r for r in ranks if r.primary), None)
    logs = {(p.header.get("node"), p.pid): p for p in session.processes if p.role == "rank"}
    hits: dict[str, list[int]] = {}
    found_on: dict[str, tuple[int, Finding]] = {}
    judged = _to_judge([r for r in ranks if r is not primary])
    for r in judged:
        log = logs.get((r.node, r.pid))
        if log is None:
            continue
        for f in judge(_rank_session(session, log)):
            hits.setdefault(f.id, []).append(r.rank)
            found_on.setdefault(f.id, (r.rank, f))
    of = (
        f"{len(ranks)}"
        if len(judged) + 1 >= len(ranks)
        else (f"the {len(judged) + 1} judged of {len(ranks)} (the most different ranks)")
    )
    out: list[Finding] = []
    for f in verdict.findings:
        rule = REGISTRY.get(f.id)
        if rule is None or not rule.per_rank:
            out.append(f)
            continue
        on = ([primary.rank] if primary else []) + hits.get(f.id, [])
        note = f"seen on rank{'s' if len(on) > 1 else ''} {span_text(on)} of {of}"
        if "stacks" in rule.needs:
            note += " (rules that need stack samples judge the primary rank only)"
        out.append(replace(f, evidence=(*f.evidence, note)))
    shown = {f.id for f in verdict.findings}
    for fid, (who, f) in sorted(found_on.items()):
        rule = REGISTRY.get(fid)
        if fid in shown or (rule is not None and not rule.per_rank) or f.severity == "info":
            continue
        on = hits[fid]
        out.append(
            replace(
                f,
                title=f"Rank{'s' if len(on) > 1 else ''} {span_text(on)}: {f.title}",
                impact=None,  # judged on that rank's steps, not the report's ledger
                claimed=(),
                evidence=(
                    *f.evidence,
                    f"seen on rank{'s' if len(on) > 1 else ''} {span_text(on)} of {of}, "
                    f"not on rank {primary.rank if primary else 0} (whose steps the report's "
                    f"ledger splits); numbers above are rank {who}'s",
                ),
            )
        )
    return Verdict(rank(out), verdict.skipped)


MAX_JUDGED = 64  # ranks judged one by one besides the primary (each costs a metrics pass)


def _to_judge(ranks: list[RankView]) -> list[RankView]:
    """All ranks of a job up to MAX_JUDGED; beyond, the most different ones: the longest data
    waits, the most own work per step, the most CPU, the slowest steps (a quarter each)."""
    if len(ranks) <= MAX_JUDGED:
        return ranks
    keys = (
        lambda r: r.wait_per_step_s,
        lambda r: r.busy_s or 0.0,
        lambda r: r.cpu_percent or 0.0,
        lambda r: r.step_s,
    )
    picked: dict[int, RankView] = {}
    for key in keys:
        for r in sorted(ranks, key=key, reverse=True)[: MAX_JUDGED // len(keys)]:
            picked.setdefault(r.rank, r)
    for r in ranks:  # ranks alike in every number: the first ones, up to the limit
        if len(picked) >= MAX_JUDGED:
            break
        picked.setdefault(r.rank, r)
    return sorted(picked.values(), key=lambda r: r.rank)


def _rank_session(session: Session, log: ProcessLog) -> Session:
    """The job as one rank saw it: its own steps and DataLoader workers, its node's samples."""
    workers = [
        w for w in session.processes if w.role == "worker" and w.header.get("ppid") == log.pid
    ]
    node = log.header.get("node")
    samples = session.node_samples.get(node) if node is not None else None
    return Session(
        run_dir=session.run_dir,
        meta={**session.meta, "stacks": None, "hang": None},
        processes=[log, *workers],
        samples=samples or session.samples,
        stdout_tail="",
        stderr_tail="",
    )
