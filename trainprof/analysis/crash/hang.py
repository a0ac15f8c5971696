"""The hang verdict: which story the stacks of a silent job tell. Pure.

From the py-spy dumps the runner kept when the job stopped making progress (the main process
and every DataLoader worker): the workers alive but blocked in user code (a shard that never
comes, a lock), a worker that died or cannot send (the main thread waits in the loader's queue
with fewer live workers than it started), the main process itself blocked or busy in user code,
or torch.compile still compiling when ``--timeout`` ran out. Every blocked process is quoted at
its deepest user frame.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainprof.analysis.attribution import is_compiling, is_user_file, short_name
from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.usercode import is_torch_path
from trainprof.store.dumps import ProcessDump
from trainprof.store.stacks import Frame
from trainprof.units import fmt_duration, plural

WORKER_FILE = "torch/utils/data/_utils/worker.py"
DDP_FILE = "torch/nn/parallel/distributed.py"


@dataclass(frozen=True)
class Blocked:
    role: str  # "main process" | "rank N" | "worker N"
    pid: int
    idle: bool
    user: Frame | None  # deepest user frame (a worker's: inside torch's worker loop)
    innermost: Frame | None
    in_loader: bool = False  # waiting in DataLoader.__next__ for a batch
    worker_loop: bool = False  # a DataLoader worker: its stack passes through _worker_loop
    ddp_forward: bool = False  # inside a DistributedDataParallel forward (its collectives)

    def quote(self) -> str:
        state = "blocked" if self.idle else "running"
        inner = f" in {short_name(self.innermost[0])}()" if self.innermost else ""
        if self.in_loader and (self.role == "main process" or self.role.startswith("rank")):
            state, inner = "waiting", " for a batch from the DataLoader"
        if self.user is None and self.worker_loop:
            return (
                f"{self.role} (pid {self.pid}) {state}{inner} in torch's worker loop, waiting "
                "for indices to make a batch of: in no user code"
            )
        if self.user is None:
            return f"{self.role} (pid {self.pid}) {state}{inner}, in no user code"
        at = f"{self.user[1]}:{self.user[2]} ({short_name(self.user[0])})"
        return f"{self.role} (pid {self.pid}) {state}{inner}, called from {at}"


def _blocked(role: str, d: ProcessDump) -> Blocked | None:
    t = d.main
    if t is None or not t.frames:
        return None
    frames = t.frames  # innermost first
    loop = next((i for i, f in enumerate(frames) if _is_worker_loop(f)), None)
    # A worker's own work is inside torch's worker loop; the frames outside it are its
    # parent's, copied by fork (the training loop's line that started the workers): a worker
    # waiting in the loop for indices is in no user code, not "blocked in main()"
    own = frames if loop is None else frames[:loop]
    user = next((f for f in own if is_user_file(f[1])), None)
    ddp = any(f[0].endswith("forward") and DDP_FILE in f[1].replace("\\", "/") for f in frames)
    return Blocked(role, d.pid, t.idle, user, frames[0], _loader_line(d), loop is not None, ddp)


def _is_worker_loop(f: Frame) -> bool:
    return f[0] == "_worker_loop" and WORKER_FILE in f[1].replace("\\", "/")


def _where(f: Frame | None) -> str | None:
    return f"{f[1]}:{f[2]} ({f[0]})" if f else None


def hang_finding(
    hang: dict[str, Any], dumps: list[ProcessDump], roles: dict[int, str], metrics: Metrics
) -> Finding:
    """The hang, told from the stacks; ``roles`` maps pids to main/worker/rank."""
    evidence = hang_evidence(hang, metrics)
    main_dump, worker_dumps, rank_dumps = split_dumps(dumps, roles)
    tail = (
        [f"full stacks: {hang['stacks_file']} in the run directory"]
        if hang.get("stacks_file")
        else []
    )
    if main_dump and main_dump.main and is_compiling(tuple(reversed(main_dump.main.frames))):
        main = _blocked(_name(main_dump, roles), main_dump)
        silent = float(hang.get("silent_s") or 0)
        return Finding(
            id="hang",
            severity="error",
            title=f"No first step within {silent:.0f} s: torch.compile was still compiling",
            evidence=tuple(evidence + _quotes(main, _workers(worker_dumps)) + tail),
            fix=(
                "compiling is progress, not a hang: give the run a longer --timeout",
                "cache compiled code across runs (TORCHINDUCTOR_CACHE_DIR on persistent disk), "
                "or compile less (torch.compile(model, dynamic=False), fewer graph breaks)",
            ),
            where=_where(main.user) if main else None,
        )
    return told(
        hang_title(hang), evidence, tail, main_dump, worker_dumps, rank_dumps, roles, metrics
    )


def _the(role: str) -> str:
    return "the main process" if role == "main process" else role


def _apart(ranks: list[Blocked]) -> tuple[list[Blocked], list[Blocked]] | None:
    """Ranks held at different user lines: (the odd ones, the others), or None when every rank
    is at the same line. The odd ones are the fewest at one line; between equally many, those
    not inside a torch call (the others wait in one: a collective); where that tells none
    apart, every rank is odd (each waits where the others do not come)."""
    at: dict[tuple[str, int] | None, list[Blocked]] = {}
    for b in ranks:
        at.setdefault((b.user[1], b.user[2]) if b.user else None, []).append(b)
    if len(at) < 2:
        return None
    groups = sorted(at.values(), key=len)
    fewest = [g for g in groups if len(g) == len(groups[0])]
    if len(fewest) > 1:
        outside = [g for g in fewest if not any(_in_torch(b) for b in g)]
        fewest = outside if len(outside) == 1 else fewest
    odd = [b for g in fewest for b in g] if len(fewest) > 1 else fewest[0]
    return odd, [b for b in ranks if b not in odd]


def _ranks_apart(
    head: str, evidence: list[str], odd: list[Blocked], rest: list[Blocked]
) -> Finding:
    """The ranks stopped at different lines: each waits where the others never come (a rank
    outside the collective the others are in, or two ranks in two different collectives)."""
    first = odd[0]
    where = ", ".join(f"{b.role} in {short_name(b.user[0]) if b.user else '?'}()" for b in odd)
    at = "; ".join(f"{b.role} at {_where(b.user)}{_waiting(b)}" for b in odd + rest)
    fix = [
        f"{at}: a collective waits for every rank, so a rank that does not come to the one "
        "the others are in (DDP all-reduces gradients during backward) leaves them waiting",
        "look for what takes a rank elsewhere: a branch on the rank, a different number of "
        "batches on each rank (DistributedSampler(..., drop_last=True), or DDP's join()), an "
        "exception caught on one rank only",
        "a shorter process-group timeout turns the wait into an error: "
        "init_process_group(..., timeout=timedelta(minutes=5))",
    ]
    alone = [b for b in odd + rest if b.ddp_forward]
    if alone and len(alone) < len(odd) + len(rest):
        names = " and ".join(b.role for b in alone)
        fix.insert(
            0,
            f"{names} called the DDP-wrapped model where the other ranks did not: DDP's forward "
            "first broadcasts the module's buffers (broadcast_buffers=True; a BatchNorm's "
            "running statistics), a collective every rank must join; on one rank call the "
            "wrapped module itself (model.module(x)), or run that code on every rank",
        )
    return Finding(
        id="hang",
        severity="error",
        title=f"{head}: the ranks stopped at different lines ({where})",
        evidence=tuple(evidence),
        fix=tuple(fix),
        where=_where(first.user),
    )


def _waiting(b: Blocked) -> str:
    return f", waiting in {short_name(b.innermost[0])}()" if b.innermost and _in_torch(b) else ""


def _in_torch(b: Blocked) -> bool:
    return b.innermost is not None and is_torch_path(b.innermost[1])


def _quotes(main: Blocked | None, workers: list[Blocked]) -> list[str]:
    return [b.quote() for b in ([main] if main else []) + workers]


def _workers(worker_dumps: list[ProcessDump]) -> list[Blocked]:
    return [b for i, d in enumerate(worker_dumps) if (b := _blocked(f"worker {i}", d)) is not None]


def told(
    head: str,
    evidence: list[str],
    tail: list[str],
    main_dump: ProcessDump | None,
    worker_dumps: list[ProcessDump],
    rank_dumps: list[ProcessDump],
    roles: dict[int, str],
    metrics: Metrics,
) -> Finding:
    """The hang's story from the stacks of the main process (rank 0 of a job of ranks), the
    other ranks and the workers: ranks stopped at different lines, the workers blocked in user
    code, the main process waiting for a batch no worker delivers, or the main process blocked
    (or busy) in its own code. ``evidence`` leads, each process's stack follows, then
    ``tail``."""
    workers_cfg = metrics.loaders[0].config.get("num_workers") if metrics.loaders else None
    main = _blocked(_name(main_dump, roles), main_dump) if main_dump else None
    ranks = [b for d in rank_dumps if (b := _blocked(_name(d, roles), d)) is not None]
    workers = _workers(worker_dumps)
    evidence = evidence + _quotes(main, ranks + workers) + tail
    waits_on_loader = _loader_line(main_dump)
    apart = _apart([main, *ranks]) if main is not None and ranks else None
    if apart is not None:
        return _ranks_apart(head, evidence, *apart)
    stuck_workers = [w for w in workers if w.user is not None]
    if waits_on_loader and stuck_workers:
        first = stuck_workers[0]
        n = len(stuck_workers)
        fn = short_name(first.user[0]) if first.user else "?"
        return Finding(
            id="hang",
            severity="error",
            title=f"{head}: {n} DataLoader worker{'s' if n > 1 else ''} alive but blocked in "
            f"user code ({fn})",
            evidence=tuple(evidence),
            fix=(
                f"the workers wait inside your code at {_where(first.user)}: whatever it waits "
                "for (a download, a lock, a queue, another process) never came",
                "give that wait a timeout and raise when it expires, so the error reaches the "
                "training loop instead of a silent hang",
                "DataLoader(..., timeout=120) makes the main process raise when a batch takes "
                "longer than that",
            ),
            where=_where(first.user),
        )
    if waits_on_loader:
        alive = len(workers)
        lost = (
            f" ({alive} of {workers_cfg} workers alive)"
            if isinstance(workers_cfg, int) and alive < workers_cfg
            else ""
        )
        return Finding(
            id="hang",
            severity="error",
            title=f"{head}: {_the(main.role) if main else 'the main process'} waits for a "
            f"batch no worker delivers{lost}",
            evidence=tuple(evidence),
            fix=(
                "a worker died or cannot send: its error is in the job's output; check ulimit "
                "-n and /dev/shm (trainprof doctor)",
                "run with DataLoader(num_workers=0) once to see the error in the main process",
                "DataLoader(..., timeout=120) turns the silent wait into an error",
            ),
            where=_where(main.user) if main else None,
        )
    if main is not None and main.user is not None:
        state = "blocked" if main.idle else "busy"
        return Finding(
            id="hang",
            severity="error",
            title=f"{head}: {_the(main.role)} is {state} in {short_name(main.user[0])}()",
            evidence=tuple(evidence),
            fix=(
                f"the main thread is at {_where(main.user)}"
                + (f", waiting in {short_name(main.innermost[0])}()" if main.innermost else ""),
                "a wait there (lock, socket, queue, collective) needs a timeout; a busy loop "
                "there never ends",
            ),
            where=_where(main.user),
        )
    return Finding(
        id="hang",
        severity="error",
        title=head,
        evidence=tuple(evidence),
        fix=(
            "read the stacks in the run directory: the main thread's innermost frame is "
            "where it waits",
            "run with DataLoader(num_workers=0) once to see an error in the main process",
        ),
    )


def _is_worker(dump: ProcessDump) -> bool:
    """A DataLoader worker runs torch's worker loop on its main thread (a worker that never
    wrote an event file has no role on record)."""
    t = dump.main
    return bool(t and any(WORKER_FILE in f[1] for f in t.frames))


def _loader_line(dump: ProcessDump | None) -> bool:
    """The main thread's stack passes through the DataLoader (it waits for a batch)."""
    t = dump.main if dump else None
    return bool(t and any("torch/utils/data/" in f[1] for f in t.frames))


def pause_finding(
    hang: dict[str, Any], dumps: list[ProcessDump], roles: dict[int, str], metrics: Metrics
) -> Finding:
    """A silence the runner reported (not stopped) after which the job went on or ended by
    itself: work after the last step (a final evaluation, a profiler's processing, an export)
    or one long step, not a hang. Said, with where the main thread was, as information."""
    silent = float(hang.get("silent_s") or 0)
    went_on = metrics.total_steps > (hang.get("steps_before") or 0)
    main = _main_process(dumps, roles)
    evidence = hang_evidence(hang, metrics) + ([main.quote()] if main else [])
    then = "made progress again" if went_on else "ended by itself (exit 0)"
    evidence.append(f"then the job {then}: nothing was stuck")
    if hang.get("stacks_file"):
        evidence.append(f"the stacks of that moment: {hang['stacks_file']} in the run directory")
    return Finding(
        id="hang",
        severity="info",
        title=f"A pause, not a hang: no progress for {silent:.0f} s, then the job {then}",
        evidence=tuple(evidence),
        fix=(
            "nothing to fix if that work is expected there; if it should take less, the main "
            "thread's stack above says where the time went",
            "a longer --hang-after keeps such a pause from being reported while the job runs",
        ),
        where=_where(main.user) if main else None,
    )


def at_work_finding(
    hang: dict[str, Any],
    dumps: list[ProcessDump],
    roles: dict[int, str],
    metrics: Metrics,
    stopped_by: str,
    by: str = "a Ctrl-C",
) -> Finding:
    """A silence the runner found at work (the stacks moved, or it read or wrote) that was
    still going on when --timeout or a Ctrl-C stopped the job: not a hang, but where it was.
    Past --timeout it is a warning (the run ran out of time without a step); after a Ctrl-C,
    information."""
    silent = float(hang.get("silent_s") or 0)
    main = _main_process(dumps, roles)
    evidence = hang_evidence(hang, metrics) + [f"at work: {hang['at_work']}"]
    evidence += [main.quote()] if main else []
    if hang.get("stacks_file"):
        evidence.append(f"the stacks of that work: {hang['stacks_file']} in the run directory")
    if main and main.in_loader:  # the work is a worker's: the main process waits for its batch
        fn = ", making a batch"
    else:
        fn = f" in {short_name(main.user[0])}()" if main and main.user else ""
    return Finding(
        id="hang",
        severity="warning" if stopped_by == "timeout" else "info",
        title=f"No progress for {silent:.0f} s, at work{fn} when {by} stopped the job: not a hang",
        evidence=tuple(evidence),
        fix=(
            "work expected there (a final evaluation, a checkpoint, an export) needs a longer "
            "--timeout",
            "work that should have ended loops at the main thread's line above",
        ),
        where=_where(main.user) if main else None,
    )


def _main_process(dumps: list[ProcessDump], roles: dict[int, str]) -> Blocked | None:
    main_dump, _workers, _ranks = split_dumps(dumps, roles)
    return _blocked(_name(main_dump, roles), main_dump) if main_dump else None


def split_dumps(
    dumps: list[ProcessDump], roles: dict[int, str]
) -> tuple[ProcessDump | None, list[ProcessDump], list[ProcessDump]]:
    """The main process's dump, the DataLoader workers', and the other ranks', of those py-spy
    could read. In a job of ranks (``roles`` "rank N") the main process is the lowest rank: not
    a launcher above them (torchrun's agent waits in its own loop whatever the ranks do)."""
    python = [d for d in dumps if d.main is not None]
    workers = [d for d in python if roles.get(d.pid) == "worker" or _is_worker(d)]
    ranks = sorted(
        (d for d in python if _rank(roles.get(d.pid)) is not None),
        key=lambda d: _rank(roles.get(d.pid)) or 0,
    )
    if ranks:
        return ranks[0], workers, ranks[1:]
    return next((d for d in python if d not in workers), None), workers, []


def _rank(role: str | None) -> int | None:
    if role and role.startswith("rank ") and role[5:].isdigit():
        return int(role[5:])
    return None


def _name(d: ProcessDump, roles: dict[int, str]) -> str:
    """How a process is called in the quotes: "rank N" in a job of ranks, else "main process"."""
    role = roles.get(d.pid) or ""
    return role if _rank(role) is not None else "main process"


def hang_title(hang: dict[str, Any]) -> str:
    silent = float(hang.get("silent_s") or 0)
    if hang.get("steps_before"):
        return f"The job hung: no progress for {silent:.0f} s"
    return f"The job hung: no first step within {silent:.0f} s"


def hang_evidence(hang: dict[str, Any], metrics: Metrics) -> list[str]:
    lines = []
    steps = hang.get("steps_before") or 0
    unit = hang.get("unit") or "step"
    silent = float(hang.get("silent_s") or 0)
    if steps:
        p50 = metrics.steady.p50_s if metrics.steady else None
        typical = f" (steps took {fmt_duration(p50)} at the median)" if p50 else ""
        lines.append(f"no progress for {silent:.1f} s after {plural(steps, unit)}{typical}")
    else:
        lines.append(f"no first optimizer step after {silent:.1f} s")
    return lines
