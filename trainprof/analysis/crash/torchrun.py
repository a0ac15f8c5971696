"""A torchrun job where a rank failed: which rank, how it ended, its own error, and which of the
other ranks' errors are only consequences. Pure.

Three sources, each checked against the others:

- torchrun's ``ChildFailedError`` report: a "Failures:" list and a "Root Cause (first observed
  failure)" entry, each with the rank, its exit code (negative: killed by that signal), pid and
  host. The root cause is the first exit torchrun *observed*, not always the first failure.
- each rank's own exception, recorded by the probe in that rank's event file (type, message,
  time), so it is read per rank even when the ranks' outputs interleave;
- each rank's traceback in the job's output (lines prefixed ``[rankN]:``), for the line in the
  user's code that raised it.

When one rank fails, the others fail *because* of it: a gloo "Connection closed by peer", an
NCCL watchdog timeout, a reset connection, or torchrun's SIGTERM. Those are named as
consequences; the cause is the rank whose own error is none of these, the first by time.

A rank killed by a signal after its exit handlers ran (the probe records its own, the last)
died in the interpreter's shutdown, after its training: said so, with the C++ runtime's
"terminate called ..." line where the output has it (gloo's worker thread, torch 2.13).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from trainprof.analysis.crash.common import innermost_user
from trainprof.analysis.crash.traceback import parse
from trainprof.analysis.findings import Finding

_ENTRY = re.compile(r"^\[(\d+)\]:\s*$")
_FIELD = re.compile(r"^\s+(time|host|rank|exitcode|error_file|traceback)\s*:\s?(.*)$")
_RANK = re.compile(r"^(\d+)(?: \(local_rank: (\d+)\))?")
_EXIT = re.compile(r"^(-?\d+)(?: \(pid: (\d+)\))?")
_SOURCE_AT = re.compile(r"^\[[^\]]*\.(?:cc|cpp|h|hpp):\d+\]\s*")
_PREFIXED = re.compile(r"^\[(?:rank|default)(\d+)\]: ?(.*)$")
# Errors a rank gets because another rank is gone: not causes.
SECONDARY = re.compile(
    r"Connection closed by peer|Connection reset by peer|Broken pipe|Connection refused"
    r"|Socket Timeout|[Tt]imed out|Watchdog caught collective operation timeout"
    r"|communicator was aborted|DistBackendError|DistNetworkError|ncclRemoteError"
    r"|remote process exited|recvValue|failed to recv|SIGTERM|Signal 15|SignalException"
    r"|TCPStore|the rendezvous|RendezvousClosedError"
)
SECONDARY_TYPES = frozenset(
    {"DistBackendError", "DistNetworkError", "DistStoreError", "SignalException", "TimeoutError"}
)


@dataclass(frozen=True)
class Failure:
    """One entry of torchrun's failure report."""

    rank: int
    local_rank: int | None
    exitcode: int | None
    pid: int | None
    host: str | None
    time: str | None
    traceback: str | None
    root: bool  # the "Root Cause (first observed failure)" entry

    @property
    def how(self) -> str:
        """``exited with code 1`` or ``was killed by SIGKILL (exit code -9)``."""
        code = self.exitcode
        if code is None:
            return "failed"
        if code < 0:
            return f"was killed by {_signame(-code)} (exit code {code})"
        return f"exited with code {code}"


def parse_failures(text: str) -> list[Failure]:
    """The entries of every torchrun failure report in the text (root cause entries marked)."""
    out: list[Failure] = []
    section: str | None = None
    entry: dict[str, str] | None = None

    def close() -> None:
        if entry is not None and "rank" in entry:
            f = _failure(entry, section == "root")
            if f is not None:
                out.append(f)

    for raw in text.splitlines():
        line = raw.rstrip()
        if line.startswith("Failures:"):
            close()
            section, entry = "failures", None
        elif line.startswith("Root Cause"):
            close()
            section, entry = "root", None
        elif section is not None and _ENTRY.match(line):
            close()
            entry = {}
        elif section is not None and entry is not None and (m := _FIELD.match(line)):
            entry.setdefault(m[1], m[2].strip())
        elif line.startswith("====") or line.startswith("----"):
            close()
            entry = None
            if line.startswith("===="):
                section = None
    close()
    return out


def _failure(entry: dict[str, str], root: bool) -> Failure | None:
    r = _RANK.match(entry.get("rank", ""))
    if r is None:
        return None
    e = _EXIT.match(entry.get("exitcode", ""))
    return Failure(
        rank=int(r[1]),
        local_rank=int(r[2]) if r[2] else None,
        exitcode=int(e[1]) if e else None,
        pid=int(e[2]) if e and e[2] else None,
        host=entry.get("host") or None,
        time=entry.get("time") or None,
        traceback=entry.get("traceback") or None,
        root=root,
    )


def rank_outputs(text: str) -> dict[int, str]:
    """Each rank's own lines of the job's output (torchrun prefixes them ``[rankN]:``)."""
    out: dict[int, list[str]] = {}
    for line in text.splitlines():
        m = _PREFIXED.match(line)
        if m:
            out.setdefault(int(m[1]), []).append(m[2])
    return {r: "\n".join(lines) for r, lines in out.items()}


@dataclass(frozen=True)
class RankError:
    rank: int
    type: str
    message: str
    t: float | None  # when it was raised (monotonic, the rank's node clock, aligned if merged)
    where: str | None  # the user's line that raised it

    @property
    def secondary(self) -> bool:
        return self.type in SECONDARY_TYPES or bool(SECONDARY.search(self.message))

    @property
    def text(self) -> str:
        first = self.message.strip().splitlines()[0] if self.message.strip() else ""
        first = _SOURCE_AT.sub("", first)  # gloo's "[.../pair.cc:553] " says nothing to a user
        if len(first) > 160:
            first = first[:159] + "…"
        return f"{self.type}: {first}" if first else self.type


def rank_errors(stderr: str, recorded: Mapping[int, RankError]) -> dict[int, RankError]:
    """The exception that ended each rank: as its probe recorded it (``recorded``), with where
    from its own output; else the last exception of its output."""
    outputs = rank_outputs(stderr)
    errors = {
        rank: RankError(rank, e.type, e.message, e.t, e.where or _where(outputs.get(rank, "")))
        for rank, e in recorded.items()
    }
    for rank, text in outputs.items():
        if rank not in errors:
            doc = parse(text)
            block = next((b for b in reversed(doc.blocks) if b.exc is not None), None)
            if block is not None and block.exc is not None:
                typ, _, msg = doc.lines[block.exc].partition(": ")
                errors[rank] = RankError(rank, typ.strip(), msg, None, _where(text))
    return errors


def _where(text: str) -> str | None:
    if not text:
        return None
    doc = parse(text)
    for block in reversed(doc.blocks):
        frame = innermost_user((block,))
        if frame is not None:
            return f"{frame.where} ({frame.func})"
    return None


def _signalled(entry: Failure | None) -> bool:
    """Killed by a signal other than torchrun's own SIGTERM to the ranks left."""
    if entry is None or entry.exitcode is None:
        return False
    return entry.exitcode < 0 and entry.exitcode != -15


# The C++ runtime's last words before it aborts the process (std::terminate).
_TERMINATE = re.compile(r"^terminate called .*$", re.MULTILINE)


def _no_python_error(signum: int, stderr: str) -> str:
    """Where a signal that killed a rank with no Python error came from, as far as it shows."""
    said = "it printed no Python error: "
    if signum == 6:
        m = _TERMINATE.search(stderr)
        if m:
            return (
                f"{said}the job's output has '{m[0].strip()}': the C++ runtime aborted the "
                "process (std::terminate in a native library), not the kernel or another process"
            )
        return (
            f"{said}SIGABRT is what a process's own abort() raises: a failed assertion or "
            "std::terminate in a native library (its core dump, or gdb, shows where)"
        )
    return (
        f"{said}{_signame(signum)} came from outside "
        "(the kernel's OOM killer sends SIGKILL; check `dmesg`)"
    )


_SIGNALS = {1: "SIGHUP", 2: "SIGINT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE"}
_SIGNALS |= {9: "SIGKILL", 11: "SIGSEGV", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM"}


def _signame(n: int) -> str:
    return _SIGNALS.get(n, f"signal {n}")


def rank_failed(
    stderr: str,
    exit_code: int | None,
    recorded: Mapping[int, RankError],
    ended: Mapping[int, int] | None = None,
) -> tuple[Finding, int] | None:
    """The finding for a torchrun job in which a rank failed, and that rank; None if none did.
    ``recorded``: the exception each rank's probe recorded, by rank. ``ended``: the ranks whose
    script had ended (their exit handlers ran) by the time they died, with their steps recorded."""
    ended = ended or {}
    failures = parse_failures(stderr)
    errors = rank_errors(stderr, recorded)
    if not failures and not errors:
        return None
    if not failures and exit_code in (0, None):
        return None  # ranks raised and caught, the job went on
    cause = _cause(failures, errors)
    if cause is None:
        return None
    rank = cause
    entry = next((f for f in failures if f.rank == rank and f.root), None) or next(
        (f for f in failures if f.rank == rank), None
    )
    own = errors.get(rank)
    how = entry.how if entry else "failed"
    # A rank that raised its own error and then died of a signal while exiting: torchrun
    # SIGTERMs every rank still running once it sees one fail (a CI run saw it: the rank that
    # raised, "killed by SIGTERM"), or the exit aborts in native code (gloo's threads with the
    # process group alive: SIGABRT in 1 of 8 plain torchrun runs of dist_rank_fails here). Its
    # error ended it, not the signal.
    raised_then_signalled = (
        own is not None
        and not own.secondary
        and entry is not None
        and entry.exitcode is not None
        and entry.exitcode < 0
    )
    # A rank killed by a signal after its exit handlers ran died in the interpreter's shutdown:
    # its training had ended (a CI run here: gloo aborting at exit, "terminate called ...").
    at_shutdown = own is None and _signalled(entry) and rank in ended
    title = f"Rank {rank} {'failed' if raised_then_signalled else how}"
    if own is not None:
        title += f": {own.text}"
    elif at_shutdown:
        title += " after its script ended"
    evidence: list[str] = []
    if entry is not None:
        at = ", ".join(
            x
            for x in (
                f"local_rank {entry.local_rank}" if entry.local_rank is not None else "",
                f"pid {entry.pid}" if entry.pid else "",
                f"host {entry.host}" if entry.host else "",
                entry.time or "",
            )
            if x
        )
        root = "torchrun's Root Cause" if entry.root else "torchrun's failure report"
        evidence.append(f"{root}: rank {rank} ({at}) {how}")
        if raised_then_signalled and entry.exitcode == -15:
            evidence.append(
                f"rank {rank} had raised its error and was still exiting when torchrun, having "
                "seen another rank fail, sent SIGTERM to the ranks left"
            )
        elif raised_then_signalled:
            evidence.append(
                f"rank {rank} had raised its error and {how.replace('was killed by', 'died of')} "
                "while exiting: native code (a backend's threads, with the process group still "
                "alive) aborted as Python shut down after the error"
            )
    roots = [f.rank for f in failures if f.root]
    if roots and rank not in roots:
        evidence.append(
            f"torchrun observed rank {roots[0]} first, but its error is a consequence: rank "
            f"{rank}'s own error came first"
        )
    if own is not None:
        line = f"its own error: {own.text}"
        if own.where:
            line += f" at {own.where}"
        evidence.append(line)
    elif entry is not None and entry.exitcode is not None and entry.exitcode < 0:
        if at_shutdown:
            evidence.append(
                f"its script had ended: its exit handlers had run ({ended[rank]} steps "
                "recorded), so it died while the interpreter shut down, after its training"
            )
        evidence.append(_no_python_error(-entry.exitcode, stderr))
    evidence.extend(_consequences(rank, failures, errors, ended))
    fix = [
        f"fix rank {rank}'s own error first: the other ranks' errors go away with it",
        "decorate your main() with torch.distributed.elastic.multiprocessing.errors.record "
        "so torchrun's Root Cause carries the failed rank's traceback",
    ]
    if at_shutdown:
        fix = [
            "the training ran to its end and only the shutdown failed: native code (a "
            "backend's thread, an object freed at exit) aborted as Python shut down. End "
            "main() with dist.barrier() and dist.destroy_process_group(), and close loggers "
            "and writers before it returns",
            "torch's gloo backend aborts this way when its worker thread frees a collective's "
            "work after Python began shutting down (seen with torch 2.13): a time.sleep(0.1) "
            "after the last collective lets that thread finish first",
        ]
    elif entry is not None and entry.exitcode in (-9, 137):
        fix.insert(0, "a rank killed by SIGKILL is usually the OOM killer: less memory per rank")
    where = own.where if own else None
    return Finding("rank-failed", "error", title, tuple(evidence), tuple(fix), None, where), rank


def _cause(failures: list[Failure], errors: dict[int, RankError]) -> int | None:
    """The rank whose failure caused the others': the first own (non-secondary) error by time,
    else a rank killed by a signal torchrun did not send, else torchrun's root cause."""
    primary = [e for e in errors.values() if not e.secondary]
    if primary:
        return min(primary, key=lambda e: (e.t if e.t is not None else float("inf"), e.rank)).rank
    killed = [f for f in failures if _signalled(f)]
    if killed:  # torchrun's root cause first, where it is one of them
        return min(killed, key=lambda f: not f.root).rank
    roots = [f for f in failures if f.root]
    if roots:
        return roots[0].rank
    return failures[0].rank if failures else None


def _consequences(
    cause: int, failures: list[Failure], errors: dict[int, RankError], ended: Mapping[int, int]
) -> list[str]:
    lines: list[str] = []
    for rank in sorted(set(errors) | {f.rank for f in failures}):
        if rank == cause:
            continue
        err = errors.get(rank)
        entry = next((f for f in failures if f.rank == rank), None)
        if err is not None:
            what = err.text if len(err.text) <= 100 else err.text[:99] + "…"
        elif entry is not None:
            what = entry.how
            if _signalled(entry) and rank in ended:  # it died at its own shutdown too
                lines.append(f"rank {rank}: {what} after its script ended, the same way")
                continue
        else:
            continue
        lines.append(f"rank {rank}: {what} (a consequence: rank {cause} was gone)")
    if len(lines) > 4:  # many ranks: the first few and a count
        lines = lines[:3] + [f"and {len(lines) - 3} more ranks, the same way"]
    return lines


def without_consequences(text: str, cause: int) -> str:
    """The output without the other ranks' prefixed lines, for the signature table: their
    secondary errors (connection resets) must not read as causes of their own."""
    keep = []
    for line in text.splitlines():
        m = _PREFIXED.match(line)
        if m and int(m[1]) != cause:
            continue
        keep.append(line)
    return "\n".join(keep)
