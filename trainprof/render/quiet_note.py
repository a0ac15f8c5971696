"""The note a report with no finding to show gives: an all-clear, or why it is not one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules import unowned_time
from trainprof.analysis.rules.registry import SIGNALS
from trainprof.analysis.stop import stop_signal_words
from trainprof.units import fmt_duration, plural


def shut_down(meta: dict[str, Any]) -> bool:
    """The job's main process was killed after its script ended: only its shutdown failed."""
    return meta.get("killed_at_shutdown") is True


def unclean_note(meta: dict[str, Any], m: Metrics | None = None) -> str:
    """What a report with no finding says of a job that did not finish cleanly."""
    if shut_down(meta):
        return (
            "No performance problem: the script ran to its end and every record was written, "
            f"but the process was then killed by {meta.get('signal')} as Python shut down (see "
            "outcome: a teardown at exit, often a native library's)"
        )
    killed = meta.get("signal") or meta.get("stopped_by") or meta.get("recording")
    if not killed and meta.get("exit_code") not in (0, None):
        # It ended by itself, with an error: every record was flushed, none was lost to a kill.
        if m is not None and m.total_steps == 0 and m.probe_missing is None:
            return (
                "Not judged: the job failed before its first step (see outcome), so there was "
                "no training to measure"
            )
        return (
            "No performance problem in the steps before the job failed (see outcome); its "
            "error is the problem to fix first"
        )
    asked = {"timeout": "--timeout", "interrupt": stop_signal_words(meta)}.get(
        str(meta.get("stopped_by"))
    )
    if asked is not None:  # the user's own stop: nothing went wrong
        return (
            f"No performance problem in what was recorded before {asked} stopped the job (its "
            "last 0.5 s of records may be missing)"
        )
    recording = meta.get("recording")
    if isinstance(recording, dict) and not meta.get("signal") and not meta.get("stopped_by"):
        at = recording.get("stopped_at_s")
        first = f"the first {at:.1f} s" if isinstance(at, (int, float)) else "the time"
        why = f" ({recording['reason']})" if recording.get("reason") else ""
        return (
            f"No performance problem in {first} that could be recorded{why}; the job ran on "
            f"to its end (exit {meta.get('exit_code')})"
        )
    return (
        "No performance problem in what was recorded, but the job did not finish cleanly (see "
        "outcome); a kill loses up to its last 0.5 s of records"
    )


def unread_only(m: Metrics) -> bool:
    """No step was read, and event files of another version were not: steps not measured."""
    return m.events_unread and m.total_steps == 0


def steps_text(m: Metrics) -> str:
    """What was counted as a step, and why when it is not an optimizer step."""
    if unread_only(m):
        return "not measured: the job's event files are of another version (see below)"
    if m.unit == "step":
        return plural(m.total_steps, "optimizer step")
    if m.unit == "batch":
        return plural(m.total_steps, "batch") + " (no optimizer step seen)"
    return plural(m.total_steps, m.unit) + " (no optimizer step or DataLoader batch seen)"


def quiet_note(
    meta: dict[str, Any] | None, m: Metrics | None, findings: Sequence[Finding] = ()
) -> tuple[str, bool]:
    """What a report with no finding to show says, and whether that is an all-clear.

    An all-clear needs a job that finished cleanly, had the steps the rules judge, and left no
    bucket of the ledger's steady time of 10 % or more unclaimed by ``findings``: the note never
    contradicts the where-the-time-went panel."""
    if meta is not None and not finished_cleanly(meta, m):
        return unclean_note(meta, m), False
    if m is None:
        return "No problems found. ✓", True
    unclaimed = unowned_time.unclaimed_text(m, findings)
    why = None if m.basis.by_stacks else SIGNALS["steps"](m)  # stacks judged, not steps
    if why is None:
        if unclaimed is not None:
            return (
                f"No finding passed its rule's threshold, but {unclaimed}: -v shows what each "
                "rule measured"
            ), False
        return "No problems found. ✓", True
    if m.probe_missing is not None:
        return (
            "Not judged: the probe did not load in the job (see probe above), so trainprof saw "
            "none of its steps; the rules that read steps were skipped (-v lists them)"
        ), False
    if unread_only(m):
        return (
            "Not judged: the job's steps are in event files of another trainprof version, "
            "which this one cannot read (see above)"
        ), False
    if m.total_steps == 0:
        return (
            "Not judged: no training step was seen. trainprof counts a step at each torch.optim "
            "optimizer's step(), or, in a job without one, at each DataLoader batch, or else at "
            "each backward(); this job made none, so the rules that read steps were skipped "
            "(-v lists them)"
        ), False
    more = "a larger --steps" if (meta or {}).get("stopped_by") == "steps" else "more steps"
    if unclaimed is not None and m.steady is not None:
        return (
            f"Not judged, yet {unclaimed}, over only {plural(m.steady.count, 'steady ' + m.unit)} "
            f"in {fmt_duration(m.steady.duration_s)}: too few for the rules (-v); {more} would "
            "have them judge it"
        ), False
    return (
        f"No problem found, but {why}: the rules that read steps were skipped (-v); "
        f"{more} would have them judged"
    ), False


def finished_cleanly(meta: dict[str, Any], m: Metrics | None = None) -> bool:
    """The job ran to its end (or to --steps) and everything was recorded, or was sampled from
    outside (``m.outside``: it has no end of ours to judge); only then is an all-clear said."""
    if meta.get("recording"):
        return False
    if m is not None and m.outside is not None:  # sampled, not run: it goes on after us
        return True
    return meta.get("stopped_by") == "steps" or (
        meta.get("exit_code") == 0 and not meta.get("signal") and not meta.get("stopped_by")
    )
