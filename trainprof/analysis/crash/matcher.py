"""Runs the crash signatures over a failed job's stderr: rows in order, most specific first, a line
used by one row not offered to the rows below it. Never raises on odd input or a broken row."""

from __future__ import annotations

from trainprof.analysis.crash.row import CrashContext, Hit, Scan, Signature
from trainprof.analysis.crash.traceback import Doc, parse
from trainprof.analysis.findings import SEVERITY_RANK, Finding
from trainprof.analysis.rules import signatures


def _find(doc: Doc, row: Signature, claimed: set[int]) -> tuple[Hit, ...]:
    hits: list[Hit] = []
    for index, line in enumerate(doc.lines):
        if index in claimed or not any(needle in line for needle in row.needles):
            continue
        for number, pattern in enumerate(row.patterns):
            m = pattern.search(line)
            if m:
                block_at = doc.owner.get(index)
                block = doc.blocks[block_at] if block_at is not None else None
                hits.append(Hit(index, line.strip(), m, number, block))
                break
    return tuple(hits)


def match_signatures(stderr: str, ctx: CrashContext) -> list[Finding]:
    """Findings for a failed job, most specific first; at most one per id; never raises."""
    if not isinstance(ctx, CrashContext):
        ctx = CrashContext()
    try:
        doc = parse(stderr)
    except Exception:
        doc = Doc((), (), {})
    fired: dict[str, Finding] = {}
    claimed: set[int] = set()
    rows = signatures()
    for row in rows:
        try:
            built = row.build(Scan(doc, ctx, _find(doc, row, claimed), dict(fired)))
        except Exception:  # one broken row must not cost the others
            continue
        if built is None:
            continue
        finding, used = built
        if finding.severity == "error" and ctx.exit_code == 0:
            finding = _survived(finding)
        fired[row.id] = finding
        claimed.update(hit.index for hit in used)
    position = {row.id: n for n, row in enumerate(rows)}
    return sorted(fired.values(), key=lambda f: (SEVERITY_RANK[f.severity], position[f.id]))


def _survived(finding: Finding) -> Finding:
    """An error in the log of a job that exited 0 was caught and did not end the run."""
    note = "the job exited 0: this error was caught and did not end the run"
    return Finding(
        finding.id,
        "warning",
        finding.title,
        (*finding.evidence, note),
        finding.fix,
        finding.impact,
        finding.where,
    )
