"""Session → Metrics → Findings → claims on the time ledger → a ranked Verdict, in one call.
Pure: the same session always gives the same verdict, whatever order the rules ran in."""

from __future__ import annotations

from dataclasses import replace

from trainprof.analysis import frameworks
from trainprof.analysis.crash.verdict import crash_findings
from trainprof.analysis.findings import Finding, Skipped, Verdict, rank
from trainprof.analysis.ledger import Ledger, allocate
from trainprof.analysis.measure import measure
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rank_hits import with_rank_hits
from trainprof.analysis.rules import COMPOUNDS, REGISTRY, all_rules, unowned_time
from trainprof.analysis.rules._advice import EXPECTED, advise
from trainprof.analysis.rules.registry import Rule, missing_signal
from trainprof.store.session import Session

# A finding whose claim is fully taken by bigger ones (it explains nothing they do not) is
# dropped when it gets less than this share of the steady time.
EXPLAINED = 0.005


def analyze(session: Session) -> tuple[Metrics, Verdict]:
    m = measure(session)
    found, skipped = evaluate(m)
    crashes = crash_findings(session, m)
    # A crash or hang explains the run before any throughput rule: its findings come first,
    # in the order the crash signatures are tried (the most specific cause first); what it found
    # to say only as information (a pause that was no hang) comes last.
    seen = {f.id for f in crashes}
    said = tuple(f for f in crashes if f.severity == "info")
    crashes = [f for f in crashes if f.severity != "info"]
    rest = tuple(f for f in found if f.id not in seen) + said
    if m.basis.by_stacks and crashes:
        # the stacks show the job hung: the rules that judge how the loop spends its time from
        # them judged a loop that did not run (a job hung waiting on its workers read as
        # input-bound)
        hung = "nothing moved in the window sampled: the hang (first) explains it"
        skipped = skipped + tuple(Skipped(f.id, hung) for f in rest)
        rest = ()
    # A torchrun job: every rule judged on every rank too; findings say which ranks they hit.
    verdict = Verdict(tuple(crashes) + rest, skipped)
    return m, with_rank_hits(session, m.activity.ranks, verdict, rank_findings)


def rank_findings(session: Session) -> tuple[Finding, ...]:
    """The findings of every rule on one rank's session (its steps, its loader, its node)."""
    return evaluate(measure(session))[0]


def evaluate(
    m: Metrics, rules: tuple[Rule, ...] | None = None
) -> tuple[tuple[Finding, ...], tuple[Skipped, ...]]:
    """Run every rule that has its signals (the others are skipped with the reason), let the
    findings claim their seconds from the ledger, and rank them."""
    findings: list[Finding] = []
    skipped: list[Skipped] = []
    for r in rules if rules is not None else all_rules():
        if r.check is None:
            continue
        reason = missing_signal(r, m)
        if reason is not None:
            skipped.append(Skipped(r.id, reason))
            continue
        finding = r.check(m)
        if finding is not None:
            own = frameworks.setting_fix(m.activity.framework, dict(r.settings))
            finding = replace(finding, fix=(*finding.fix, *own), harm=r.harm)
            findings.append(advise(m, r, finding))
    findings = _only_if_unexplained(findings)
    if m.ledger is not None:
        findings = claim(m.ledger, findings)
        if rules is None:  # every rule judged: the time none of them owns is said too
            findings = unowned_time.with_unowned(m, findings, tuple(skipped))
        if m.device_idle is not None:
            findings = on_the_device(findings, m.device_idle)
    return said_together(cause_first(rank(findings))), tuple(skipped)


# cpu-starved leads only when the loop's own wait is at least this share of the steady time and
# a fix of its is predicted to gain; otherwise the cause it compounds with leads.
CPU_WAIT_LEADS = 0.25
_STARVED = "cpu-starved"
_CPU_WORK = ("host", "stalls", "input")  # rule families of the loop's own work


def cause_first(findings: tuple[Finding, ...]) -> tuple[Finding, ...]:
    """Ranked findings, with cpu-starved after the first finding it compounds with (input-bound,
    loop-overhead, ...) unless its wait is large and a fix of its is predicted to gain: a wait
    for a CPU compounds a cause, and what removing it gains is not measured."""
    at = next((i for i, f in enumerate(findings) if f.id == _STARVED), None)
    if at is None:
        return findings
    starved = findings[at]
    if any(f.severity == starved.severity for f in findings[:at]):
        return findings  # it does not lead
    predicted = any(EXPECTED in line for line in starved.fix)
    if predicted and (starved.impact or 0.0) >= CPU_WAIT_LEADS:
        return findings
    pairs = [pair for pair in COMPOUNDS if _STARVED in pair]

    def compounded(f: Finding) -> bool:
        """A cause the wait for a CPU slows: one it names as compounding, or CPU work of the
        loop's that claims measured time (its host work, a stall, its data loading)."""
        if any(f.id in p for p in pairs):
            return True
        r = REGISTRY.get(f.id)
        cpu_work = r is not None and r.family in _CPU_WORK and f.id != unowned_time.ID
        return cpu_work and (f.impact or 0.0) > 0

    cause = next(
        (
            i
            for i, f in enumerate(findings)
            if i > at and f.severity == starved.severity and compounded(f)
        ),
        None,
    )
    if cause is None:
        return findings
    rest = [f for i, f in enumerate(findings) if i != at]
    rest.insert(cause, starved)  # just after the cause (its index shifted down by one)
    return tuple(rest)


def said_together(findings: tuple[Finding, ...]) -> tuple[Finding, ...]:
    """Two findings whose causes compound each say so after their first line of evidence: the
    one ranked first tells how, the other points back to it."""
    found = {f.id for f in findings}
    out = []
    for n, f in enumerate(findings):
        above = {g.id for g in findings[:n]}
        lines = [
            f"with {other} (also found here): {how}"
            if other not in above
            else f"with {other} (also found here): how the two compound is said under {other}"
            for pair, how in sorted(COMPOUNDS.items(), key=lambda kv: sorted(kv[0]))
            if f.id in pair and (other := next(iter(pair - {f.id}))) in found
        ]
        out.append(replace(f, evidence=(*f.evidence[:1], *lines, *f.evidence[1:])) if lines else f)
    return tuple(out)


def on_the_device(findings: list[Finding], idle: float) -> list[Finding]:
    """On a GPU job, host time while the GPU is busy costs nothing: the steady-loop host
    findings together cost at most the GPU's idle share of a step, shared in proportion."""
    host = [
        f
        for f in findings
        if f.id in REGISTRY and REGISTRY[f.id].costs == "host" and f.impact is not None
    ]
    total = sum(f.impact or 0.0 for f in host)
    if total <= idle or total <= 0:
        return findings
    scale = idle / total
    note = (
        f"on the device clock the GPU sat idle {idle:.0%} of a step: host-side work costs "
        "only that idle time, shared here in proportion"
    )
    return [
        replace(f, impact=(f.impact or 0.0) * scale, evidence=(*f.evidence, note))
        if f in host
        else f
        for f in findings
    ]


def claim(ledger: Ledger, findings: list[Finding]) -> list[Finding]:
    """Each finding's impact is the seconds it claimed over the steady window; a second goes to
    one finding only, so the impacts add up to at most 100 %. A finding that asks for none of
    its buckets' time (its cost was not measured: every fraction 0) keeps no impact, not 0."""
    wants = {}
    for f in findings:
        declared = REGISTRY[f.id].claims if f.id in REGISTRY else ()
        asked = f.wants or tuple((b, 1.0) for b in declared)
        wants[f.id] = tuple((b, min(1.0, max(0.0, x))) for b, x in asked if b in declared)
    got = allocate(ledger, wants)
    out = []
    for f in findings:
        if not any(x > 0 for _b, x in wants.get(f.id, ())):
            out.append(f)
            continue
        seconds = got.get(f.id, {})
        impact = sum(seconds.values()) / ledger.window_s if ledger.window_s > 0 else 0.0
        share_asked = sum(ledger.seconds.get(b, 0.0) * x for b, x in wants[f.id]) / ledger.window_s
        if share_asked >= EXPLAINED and impact < EXPLAINED:
            continue  # bigger claims took all its seconds: they explain it
        out.append(replace(f, impact=impact, claimed=tuple(sorted(seconds.items()))))
    return out


def _only_if_unexplained(findings: list[Finding]) -> list[Finding]:
    """A rule of last resort's finding is dropped when a specific cause was found."""

    def last_resort(f: Finding) -> bool:
        return f.id in REGISTRY and REGISTRY[f.id].last_resort

    specific = [f for f in findings if not last_resort(f) and f.severity != "info"]
    return [f for f in findings if not last_resort(f) or not specific]
