"""DataLoader workers hit the open-file limit.

The job ran out of file descriptors (RLIMIT_NOFILE), mostly through the file_descriptor sharing
strategy of the batches in flight.

Anti-pattern::

    ulimit -n 1024 with the file_descriptor sharing strategy

Best practice::

    ulimit -n 65536, or torch.multiprocessing.set_sharing_strategy('file_system')
"""

from __future__ import annotations

import re

from trainprof.analysis.crash.common import (
    frame_funcs,
    in_worker,
    loop_where,
    make_finding,
)
from trainprof.analysis.crash.row import Built, CrashContext, Hit, Scan
from trainprof.analysis.crash.traceback import Doc
from trainprof.analysis.crash.units import cite, measured_count, measured_text, pct
from trainprof.analysis.rules.registry import signature

_EMFILE_PATH = re.compile(r"Too many open files: '([^']+)'")


def _fd_accept(hit: Hit) -> bool:
    if hit.pattern != 2:
        return True
    errno, reason = hit.match[3], hit.match[2] or ""
    return errno is None or errno == "24" or "Too many open files" in reason


def _fd_where(hit: Hit) -> str:
    funcs = frame_funcs(hit.block)
    worker = in_worker(hit)
    if hit.pattern == 0:
        return "in the main process (DataLoader's own check of the open-files limit)"
    if worker:
        return f"in {worker}"
    if "_feed" in funcs:
        return "in a worker's queue feeder thread"
    if "_serve" in funcs:
        return "in a file-descriptor sharing thread (multiprocessing resource_sharer)"
    if funcs & {"recvfds", "rebuild_storage_fd", "rebuild_storage_filename", "detach"}:
        return "in the main process, while receiving a batch's shared tensors"
    return ""


def _strategy(doc: Doc, ctx: CrashContext) -> tuple[str | None, str]:
    """The sharing strategy in use, and whether it was measured or read off the traceback."""
    measured = measured_text(ctx.sharing_strategy)
    if measured:
        return measured, "measured"
    funcs = set().union(*(frame_funcs(block) for block in doc.blocks)) if doc.blocks else set()
    if funcs & {"rebuild_storage_fd", "DupFd", "_share_fd_cpu_", "recvfds"}:
        return "file_descriptor", "seen in the traceback"
    if funcs & {"rebuild_storage_filename", "_share_filename_cpu_", "_new_shared_filename"}:
        return "file_system", "seen in the traceback"
    return None, ""


NEEDLES = (
    "Too many open files",
    "ancdata",
    "unable to open shared memory object",
    "EMFILE",
    "Errno 24",
)
PATTERNS = tuple(
    re.compile(p)
    for p in (
        r"Too many open files\. Communication with the workers is no longer possible",
        r"received (\d+) items of ancdata",
        r"unable to open shared memory object <(/?torch_[^>]*)> in read-write mode"
        r"(?:: ([^()]*?) \((\d+)\))?",
        r"\[Errno 24\]|Too many open files|\bEMFILE\b",
    )
)


@signature(
    id="worker-fd-limit",
    examples=("hang_fd_limit",),
    title="DataLoader workers hit the open-file limit",
    order=60,
    needles=NEEDLES,
    patterns=PATTERNS,
)
def build(scan: Scan) -> Built | None:
    hits = [hit for hit in scan.hits if _fd_accept(hit)]
    if not hits:
        return None
    ctx = scan.ctx
    best = min(hits, key=lambda hit: (hit.pattern, -hit.index))
    evidence = [cite(best.text)]
    if len(hits) > 1:
        evidence.append(f"{len(hits)} lines report running out of file descriptors")
    places = [place for place in dict.fromkeys(_fd_where(hit) for hit in hits) if place]
    evidence.extend(places)
    opened = next((m[1] for hit in hits if (m := _EMFILE_PATH.search(hit.text))), None)
    if opened:
        evidence.append(f"opening {opened!r} failed: the code itself may leak open files")
    background = all(
        hit.pattern == 3
        and not (hit.block is not None and hit.block.wrapped)
        and bool(frame_funcs(hit.block) & {"_feed", "_serve"})
        for hit in hits
    )
    if background:
        evidence.append(
            "the errors are only in background threads: the batch is never delivered, so the "
            "loader hangs instead of crashing"
        )
    soft, hard = measured_count(ctx.nofile_soft), measured_count(ctx.nofile_hard)
    if soft is not None or hard is not None:
        evidence.append(
            f"RLIMIT_NOFILE soft {soft if soft is not None else 'unknown'}, "
            f"hard {hard if hard is not None else 'unknown'}"
        )
    peak = measured_count(ctx.max_open_fds)
    if peak is not None:
        line = f"peak open file descriptors {peak}"
        if soft:
            line += f" ({pct(peak, soft)} of the soft limit)"
        evidence.append(line)
    strategy, source = _strategy(scan.doc, ctx)
    if strategy:
        evidence.append(f"sharing strategy {strategy} ({source})")
        if strategy == "file_descriptor":
            evidence.append(
                "with file_descriptor sharing every tensor of every batch in flight holds an open "
                "descriptor"
            )
    workers = measured_count(ctx.num_workers)
    if workers is not None:
        evidence.append(f"num_workers={workers}")
    fix: list[str] = []
    if soft is not None and hard is not None and soft < hard:
        fix.append(
            f"`ulimit -n {hard}` in the shell that starts the job: the soft limit can be raised "
            f"up to the hard limit ({hard}) without root"
        )
    else:
        fix.append(
            "`ulimit -n 65536` in the shell that starts the job (raising the hard limit needs "
            "root: `nofile` in /etc/security/limits.conf)"
        )
    fix.append("Docker: `docker run --ulimit nofile=65536:65536 ...`")
    fix.append(
        "Kubernetes has no pod field for it: containers inherit the runtime's limit (raise "
        "`LimitNOFILE` / default ulimits of containerd or dockerd on the nodes), or run "
        "`ulimit -n` in the entrypoint up to the hard limit"
    )
    fix.append(
        "SLURM copies the submitting shell's limits (`PropagateResourceLimits`): run "
        "`ulimit -n 65536` before `sbatch`/`srun`; check with `srun bash -c 'ulimit -n'`"
    )
    if strategy != "file_system":
        fix.append(
            "Or share tensors by file name instead of descriptor: "
            '`torch.multiprocessing.set_sharing_strategy("file_system")` at the top of the '
            "script, before any DataLoader is created"
        )
    fix.append(
        "Return fewer, larger tensors per sample (stack them in `__getitem__`): each tensor in "
        "a batch in flight costs a descriptor"
    )
    if opened:
        fix.append(
            'Close what `__getitem__` opens: `with open(path, "rb") as f:` / '
            '`with Image.open(path) as img: img = img.convert("RGB")`'
        )
    title = "DataLoader ran out of file descriptors (RLIMIT_NOFILE)"
    if background:
        title += ": the loader hangs"
    return (
        make_finding("worker-fd-limit", "error", title, evidence, fix, loop_where(scan.doc, best)),
        tuple(hits),
    )
