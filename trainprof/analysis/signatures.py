"""Crash signatures: from a failed job's stderr (plus what was measured) to one finding per cause.

A crashed DataLoader job prints a wall of multiprocessing tracebacks whose last line is rarely the
cause (``ConnectionResetError`` is usually a *symptom*). This module reads that text the way a
person who has seen every historical variant would: it splits it into tracebacks (including the
worker tracebacks that torch re-raises in the main process), matches each line against a table of
signatures, and builds findings that quote the matched line, add the limits that were measured
around the failure (``CrashContext``), and name the fix that keeps the job fast.

Pure: standard library only, no I/O, never raises on odd input (an analysis bug must never cost
the user their report). The table ``SIGNATURES`` is data: one row per finding id, with the
literal needles that pre-filter lines, the compiled patterns, and the function that turns the hits
into a finding (or rejects them, when a row must be conservative).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from trainprof.analysis.findings import SEVERITY_RANK, Finding, Severity

__all__ = ["SIGNATURES", "CrashContext", "Signature", "match_signatures", "user_frame"]


@dataclass(frozen=True)
class CrashContext:
    """What was measured around the failure. ``None`` means "not measured", never zero."""

    exit_code: int | None = None  # job exit code (128+N when killed by signal N)
    signal: str | None = None  # e.g. "SIGKILL"
    nofile_soft: int | None = None
    nofile_hard: int | None = None
    max_open_fds: int | None = None  # peak open fds of the job or its workers before the failure
    shm_size_bytes: int | None = None
    shm_peak_used_bytes: int | None = None
    worker_peak_rss_bytes: int | None = None
    mem_total_bytes: int | None = None  # system
    mem_available_min_bytes: int | None = None  # system
    job_peak_rss_bytes: int | None = None
    sharing_strategy: str | None = None  # torch.multiprocessing sharing strategy
    num_workers: int | None = None
    last_batch_shapes: str | None = None  # optional text if the probe saw the last batch


# --------------------------------------------------------------------------------------------
# Reading the text: lines, frames, traceback blocks
# --------------------------------------------------------------------------------------------

_MAX_CHARS = 16_000_000  # beyond this keep the head and (mostly) the tail: crashes end the log
_HEAD_CHARS = 1_000_000
_MAX_LINE = 4_000  # regexes only ever see this much of one line
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_RANK_PREFIX = re.compile(r"^\[(?:rank|default)\d+\]: ?")  # torchrun / torchelastic line prefixes
_HEADER = "Traceback (most recent call last):"
_OLD_WRAP = re.compile(r"^[A-Za-z_][\w.]*: Traceback \(most recent call last\):$")
_CAUGHT = re.compile(r"Caught \w+ in DataLoader worker process (\d+)\.")
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>.+?)\s*$')
_CARETS = re.compile(r"^[\s~^]+$")

# Paths that are not the user's own code: installed packages, the standard library, torch (also
# from a source checkout), trainprof itself, and interpreter internals such as <frozen runpy>.
_LIBRARY_PATH = re.compile(
    r"[\\/](?:site|dist)-packages[\\/]"
    r"|[\\/]lib(?:64)?[\\/]python\d+(?:\.\d+)?[\\/]"
    r"|^[A-Za-z]:\\.*\\Lib\\"
    r"|[\\/](?:torch|trainprof)[\\/]"
    r"|[\\/]multiprocessing[\\/]"
    r"|[\\/](?:threading|runpy|selectors|socket|queue)\.py$"
    r"|^<(?!string>|stdin>|ipython-input)"
)


@dataclass(frozen=True)
class _Frame:
    path: str
    line: int
    func: str
    code: str  # the first source line printed under the frame, "" when none was printed

    @property
    def is_user(self) -> bool:
        # The bundled demo and zoo jobs live inside the trainprof package but are user code.
        return "trainprof/examples/" in self.path or not _LIBRARY_PATH.search(self.path)

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class _Block:
    """One ``Traceback (most recent call last):`` and what follows it."""

    header: int  # line index of the header
    exc: int | None  # line index of the exception line; None when the block is cut short
    end: int  # one past the last line of the exception message
    frames: tuple[_Frame, ...]  # outermost first, as printed
    worker: int | None  # DataLoader worker id of a worker traceback re-raised by the main process
    wrapped: bool  # the block is a worker's original traceback (new or pre-1.2 wrapping)
    parent: int | None  # index of the block that re-raised this one
    preamble: str  # the line printed before the header, e.g. "Exception ignored in: ..."


@dataclass(frozen=True)
class _Doc:
    lines: tuple[str, ...]
    blocks: tuple[_Block, ...]
    owner: Mapping[int, int]  # line index -> index of the block whose exception message holds it


def _normalise(text: object) -> tuple[str, ...]:
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8", errors="replace")
    if not isinstance(text, str):
        return ()
    if len(text) > _MAX_CHARS:
        text = text[:_HEAD_CHARS] + "\n" + text[-(_MAX_CHARS - _HEAD_CHARS) :]
    text = _ANSI.sub("", text.replace("\x00", ""))
    return tuple(_RANK_PREFIX.sub("", line)[:_MAX_LINE] for line in text.splitlines())


def _is_header(line: str) -> bool:
    return line.rstrip().endswith(_HEADER)


def _parse(text: object) -> _Doc:
    lines = _normalise(text)
    n = len(lines)
    blocks: list[_Block] = []
    owner: dict[int, int] = {}
    i = 0
    while i < n:
        line = lines[i].rstrip()
        if not line.endswith(_HEADER):
            i += 1
            continue
        worker: int | None = None
        wrapped = False
        parent: int | None = None
        stripped = line.strip()
        if stripped.startswith("Original " + _HEADER):
            wrapped = True
            if i > 0:
                caught = _CAUGHT.search(lines[i - 1])
                worker = int(caught.group(1)) if caught else None
            parent = owner.get(i - 1)
        elif _OLD_WRAP.match(stripped):
            wrapped = True
            parent = owner.get(i)
        preamble = lines[i - 1].strip() if i > 0 else ""
        frames: list[_Frame] = []
        exc: int | None = None
        j = i + 1
        while j < n:
            cur = lines[j]
            m = _FRAME.match(cur)
            if m:
                frames.append(_Frame(m["path"], int(m["line"]), m["func"], ""))
            elif not cur.strip():
                break  # a blank line before any exception line: the block was cut short
            elif cur[:1] in (" ", "\t"):
                if frames and not frames[-1].code and not _CARETS.match(cur):
                    last = frames[-1]
                    frames[-1] = _Frame(last.path, last.line, last.func, cur.strip())
            else:
                exc = j
                break
            j += 1
        end = j
        if exc is not None:
            end = exc + 1
            if not _is_header(lines[exc]):
                while (
                    end < n
                    and end - exc < 40
                    and lines[end].strip()
                    and not _is_header(lines[end])
                    and not _FRAME.match(lines[end])
                ):
                    end += 1
        block = _Block(i, exc, end, tuple(frames), worker, wrapped, parent, preamble)
        blocks.append(block)
        if exc is not None:
            for k in range(exc, end):
                owner[k] = len(blocks) - 1
        # A pre-1.2 wrapper line ("RuntimeError: Traceback (most recent call last):") is both the
        # exception line of this block and the header of the worker's block: parse it again.
        i = exc if exc is not None and _is_header(lines[exc]) else max(end, i + 1)
    return _Doc(lines, tuple(blocks), owner)


def _frames_in(text: object) -> tuple[_Frame, ...]:
    found: list[_Frame] = []
    for line in _normalise(text):
        m = _FRAME.match(line)
        if m:
            found.append(_Frame(m["path"], int(m["line"]), m["func"], ""))
    return tuple(found)


def user_frame(traceback_text: str) -> str | None:
    """``file:line`` of the deepest frame in the text that is the user's own code, else None.

    Deepest means printed last: in a worker-wrapped traceback the worker's frames come after the
    main process's, and in a chain of exceptions the final one comes last. Installed packages,
    the standard library, torch and trainprof are not the user's code.
    """
    try:
        for frame in reversed(_frames_in(traceback_text)):
            if frame.is_user:
                return frame.where
    except Exception:  # never raise on odd input
        return None
    return None


# --------------------------------------------------------------------------------------------
# The table's machinery
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Hit:
    index: int  # line index in the normalised text
    text: str
    match: re.Match[str]
    pattern: int  # which of the row's patterns matched
    block: _Block | None  # the traceback whose exception message holds the line

    @property
    def is_exception_line(self) -> bool:
        return self.block is not None and self.block.exc == self.index


@dataclass(frozen=True)
class _Scan:
    doc: _Doc
    ctx: CrashContext
    hits: tuple[_Hit, ...]
    fired: Mapping[str, Finding]  # findings of the rows above this one


_Built = tuple[Finding, tuple[_Hit, ...]]  # the finding and the hits it used (claimed lines)


@dataclass(frozen=True)
class Signature:
    """One row: a finding id, cheap literal needles, patterns, and the builder."""

    id: str
    needles: tuple[str, ...]
    patterns: tuple[re.Pattern[str], ...]
    build: Callable[[_Scan], _Built | None]


def _find(doc: _Doc, row: Signature, claimed: set[int]) -> tuple[_Hit, ...]:
    hits: list[_Hit] = []
    for index, line in enumerate(doc.lines):
        if index in claimed or not any(needle in line for needle in row.needles):
            continue
        for number, pattern in enumerate(row.patterns):
            m = pattern.search(line)
            if m:
                block_at = doc.owner.get(index)
                block = doc.blocks[block_at] if block_at is not None else None
                hits.append(_Hit(index, line.strip(), m, number, block))
                break
    return tuple(hits)


def match_signatures(stderr: str, ctx: CrashContext) -> list[Finding]:
    """Findings for a failed job, most specific first; at most one per id; never raises."""
    if not isinstance(ctx, CrashContext):
        ctx = CrashContext()
    try:
        doc = _parse(stderr)
    except Exception:
        doc = _Doc((), (), {})
    fired: dict[str, Finding] = {}
    claimed: set[int] = set()
    for row in SIGNATURES:
        try:
            built = row.build(_Scan(doc, ctx, _find(doc, row, claimed), dict(fired)))
        except Exception:  # one broken row must not cost the others
            continue
        if built is None:
            continue
        finding, used = built
        if finding.severity == "error" and ctx.exit_code == 0:
            finding = _survived(finding)
        fired[row.id] = finding
        claimed.update(hit.index for hit in used)
    position = {row.id: n for n, row in enumerate(SIGNATURES)}
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


# --------------------------------------------------------------------------------------------
# Small helpers shared by the builders
# --------------------------------------------------------------------------------------------

_SIZE = r"\d+(?:\.\d+)? ?(?:bytes|[KMGT]i?B|B)"
_UNITS = {"B": 1, "bytes": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _bytes(size: str | None) -> float | None:
    if not size:
        return None
    m = re.match(r"(\d+(?:\.\d+)?) ?(bytes|([KMGT])i?B|B)$", size.strip())
    if not m:
        return None
    return float(m[1]) * _UNITS[m[3] or m[2]]


def _fmt(n: float) -> str:
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def _pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.0f}%"


def _count(value: object) -> int | None:
    """A measured count or size; anything else (None, bool, negative, wrong type) is unmeasured."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _text(value: object) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _cite(line: str) -> str:
    line = line.strip()
    return "stderr: " + (line if len(line) <= 300 else line[:299] + "…")


def _innermost_user(blocks: tuple[_Block | None, ...]) -> _Frame | None:
    for block in blocks:
        if block is None:
            continue
        for frame in reversed(block.frames):
            if frame.is_user:
                return frame
    return None


def _blocks_up(doc: _Doc, block: _Block | None) -> tuple[_Block | None, ...]:
    """The block and the blocks that re-raised it (worker traceback first, then the main one)."""
    chain: list[_Block | None] = [block]
    while block is not None and block.parent is not None and len(chain) < 8:
        block = doc.blocks[block.parent]
        chain.append(block)
    return tuple(chain)


def _code_where(doc: _Doc, hit: _Hit) -> _Frame | None:
    return _innermost_user(_blocks_up(doc, hit.block))


def _loop_where(doc: _Doc, hit: _Hit | None = None) -> str | None:
    """For failures of the loader itself: the user's code that raised it (in a worker or not),
    else the line that pulled the batch (the user frame just above DataLoader ``__next__``)."""
    if hit is not None and hit.block is not None:
        own = _innermost_user((hit.block,))
        if own is not None and (hit.block.wrapped or own is hit.block.frames[-1]):
            return own.where
    for block in reversed(doc.blocks):
        for n, frame in enumerate(block.frames):
            if frame.func == "__next__" and "data" in frame.path and n > 0:
                above = block.frames[n - 1]
                if above.is_user:
                    return above.where
    return None


def _in_worker(hit: _Hit) -> str | None:
    if hit.block is None or not hit.block.wrapped:
        return None
    if hit.block.worker is not None:
        return f"DataLoader worker {hit.block.worker}"
    return "a DataLoader worker"


def _frame_funcs(block: _Block | None) -> set[str]:
    return {frame.func for frame in block.frames} if block is not None else set()


def _strategy(doc: _Doc, ctx: CrashContext) -> tuple[str | None, str]:
    """The sharing strategy in use, and whether it was measured or read off the traceback."""
    measured = _text(ctx.sharing_strategy)
    if measured:
        return measured, "measured"
    funcs = set().union(*(_frame_funcs(block) for block in doc.blocks)) if doc.blocks else set()
    if funcs & {"rebuild_storage_fd", "DupFd", "_share_fd_cpu_", "recvfds"}:
        return "file_descriptor", "seen in the traceback"
    if funcs & {"rebuild_storage_filename", "_share_filename_cpu_", "_new_shared_filename"}:
        return "file_system", "seen in the traceback"
    return None, ""


@dataclass(frozen=True)
class _Pressure:
    near: bool | None  # None: memory was not measured
    evidence: tuple[str, ...]


def _memory_pressure(ctx: CrashContext) -> _Pressure:
    """Whether host memory was near its limit, from whatever was measured (never from absence)."""
    total = _count(ctx.mem_total_bytes) or None
    available = _count(ctx.mem_available_min_bytes)
    job = _count(ctx.job_peak_rss_bytes)
    worker = _count(ctx.worker_peak_rss_bytes)
    workers = _count(ctx.num_workers)
    evidence: list[str] = []
    near: bool | None = None
    if total is not None and available is not None:
        evidence.append(
            f"system memory available fell to {_fmt(available)} of {_fmt(total)} "
            f"({_pct(available, total)} left)"
        )
        near = available <= max(min(0.05 * total, 2 * (1 << 30)), 256 * (1 << 20))
    if total is not None and job is not None:
        evidence.append(f"job peak RSS {_fmt(job)} ({_pct(job, total)} of {_fmt(total)})")
        near = bool(near) or job >= 0.9 * total
    if worker is not None:
        if workers:
            together = worker * workers
            line = f"each DataLoader worker peaked at {_fmt(worker)} RSS ({workers} workers"
            line += f", {_fmt(together)} together, counting pages they share)"
        else:
            line = f"a DataLoader worker peaked at {_fmt(worker)} RSS"
        evidence.append(line)
    return _Pressure(near, tuple(evidence))


def _finding(
    id: str,
    severity: Severity,
    title: str,
    evidence: list[str],
    fix: list[str],
    where: str | None,
) -> Finding:
    unique = tuple(dict.fromkeys(e for e in evidence if e))
    return Finding(id, severity, title, unique, tuple(dict.fromkeys(fix)), None, where)


# --------------------------------------------------------------------------------------------
# ragged-batch
# --------------------------------------------------------------------------------------------

_STACK = re.compile(
    r"stack expects each tensor to be equal size, but got (\[[^\]]*\]) at entry (\d+) "
    r"and (\[[^\]]*\]) at entry (\d+)"
)
# In a worker, default_collate stacks into shared memory sized for the batch it expects; a
# sample of another size then fails with this text instead of "stack expects ...".
_RESIZE = re.compile(r"Trying to resize storage that is not resizable")
_SIZES_OLD = re.compile(
    r"Sizes of tensors must match except in dimension (\d+)\. Got (\d+) and (\d+) in dimension (\d+)"
)


def _shape(text: str) -> tuple[int, ...] | None:
    body = text.strip().strip("[]()").replace("torch.Size", "").strip("[]() ")
    if not body:
        return ()
    try:
        return tuple(int(part) for part in re.split(r"\s*[,x]\s*", body) if part)
    except ValueError:
        return None


def _in_collate(doc: _Doc, hit: _Hit) -> bool:
    if hit.block is None:
        return True  # the bare message (e.g. from the probe): collate is by far the usual source
    for block in _blocks_up(doc, hit.block):
        if block is None:
            continue
        if block.wrapped:
            return True
        for frame in block.frames:
            if "collate" in frame.func or frame.path.endswith(("collate.py", "fetch.py")):
                return True
    return False


_PAD_COLLATE = (
    "Pad in a collate_fn: `from torch.nn.utils.rnn import pad_sequence`; "
    "`def pad_collate(batch): xs, ys = zip(*batch); "
    "return pad_sequence(xs, batch_first=True, padding_value=0), torch.tensor(ys)`; "
    "then `DataLoader(..., collate_fn=pad_collate)` (keep the lengths if the model needs a mask)"
)


def _build_ragged(scan: _Scan) -> _Built | None:
    hits = [hit for hit in scan.hits if _in_collate(scan.doc, hit)]
    if not hits:
        return None
    hit = hits[-1]
    evidence = [_cite(hit.text)]
    fix: list[str] = []
    rank_differs = False
    m = hit.match
    if hit.pattern == 0:
        a, b = _shape(m[1]), _shape(m[3])
        label = f"sample shapes differ: {m[1]} (entry {m[2]}) vs {m[3]} (entry {m[4]})"
        if a is not None and b is not None and len(a) != len(b):
            rank_differs = True
            label += f" — different number of dimensions ({len(a)} vs {len(b)})"
        elif a is not None and b is not None:
            dims = [str(d) for d in range(len(a)) if a[d] != b[d]]
            if dims:
                label += f" — they differ in dimension {', '.join(dims)}"
        evidence.append(label)
    elif hit.pattern == 1:
        evidence.append(
            f"sample sizes differ in dimension {int(m[4]) - 1} of the samples: {m[2]} vs {m[3]}"
        )
    else:
        evidence.append(
            "the worker's collate preallocated shared memory for same-sized samples and one "
            "sample was a different size (torch's other wording of a ragged batch)"
        )
    where = _in_worker(hit)
    evidence.append(
        "raised while collating a batch"
        + (f" in {where}" if where else "")
        + " (default_collate stacks same-shaped samples with torch.stack)"
    )
    shapes = _text(scan.ctx.last_batch_shapes)
    if shapes:
        evidence.append(f"last batch seen: {shapes}")
    if rank_differs:
        fix.append(
            'Make every sample the same shape in the Dataset: e.g. `img.convert("RGB")` for '
            "grayscale images among RGB ones, or add the missing dimension with `unsqueeze`"
        )
    fix.append(_PAD_COLLATE)
    fix.append(
        "Or bucket by length: a `batch_sampler` that groups samples of similar length cuts the "
        "padding; for images, resize or crop to one size in the transform "
        "(`torchvision.transforms.Resize((H, W))`)"
    )
    frame = _code_where(scan.doc, hit)
    return (
        _finding(
            "ragged-batch",
            "error",
            "Samples in a batch have different shapes, so the default collate cannot stack them",
            evidence,
            fix,
            frame.where if frame else None,
        ),
        (hit,),
    )


# --------------------------------------------------------------------------------------------
# collate-structure
# --------------------------------------------------------------------------------------------

_TENSOR_ATTRS = (
    "to|cuda|cpu|float|half|double|long|int|bool|bfloat16|size|shape|view|reshape|unsqueeze|"
    "squeeze|permute|numel|dim|ndim|device|dtype|contiguous|detach|numpy|pin_memory|type|flatten"
)
_BATCHY_SUBSCRIPT = re.compile(
    r"\b(?:batch|data|sample|samples|inputs?|targets?|labels?|features|example|examples|record|"
    r"item|items|b|x|y|xb|yb|mb|minibatch)\w*\s*\["
)


def _user_collate_fn(block: _Block) -> bool:
    """The innermost frame is a user function called by DataLoader's fetcher: the collate_fn."""
    frames = block.frames
    return (
        len(frames) >= 2
        and frames[-1].is_user
        and frames[-2].func == "fetch"
        and frames[-2].path.endswith("fetch.py")
    )


def _collate_accept(hit: _Hit) -> bool:
    if not hit.is_exception_line or hit.block is None or not hit.block.frames:
        return False
    block = hit.block
    inner = block.frames[-1]
    code = inner.code
    if block.wrapped:  # in a worker: only a user collate_fn indexing the list of samples
        return hit.pattern in (0, 1, 2, 5) and _user_collate_fn(block) and "[" in code + "."
    if hit.pattern == 4:  # a str/list/dict reached a torch function: through the user's code
        return any(frame.is_user for frame in block.frames)
    if not inner.is_user or not code:
        return False
    if hit.pattern in (0, 5):
        return "[" in code
    if hit.pattern == 1:
        return f".{hit.match[2]}" in code
    if hit.pattern == 2:
        key = hit.match[1].strip().strip("'\"")
        return bool(key) and key in code and bool(_BATCHY_SUBSCRIPT.search(code))
    if hit.pattern == 3:
        return bool(re.match(r"\s*for\b.+\bin\b", code)) or "next(" in code or "batch" in code
    return False


def _build_collate(scan: _Scan) -> _Built | None:
    hits = [hit for hit in scan.hits if _collate_accept(hit)]
    if not hits:
        return None
    hit = hits[-1]
    m = hit.match
    frame = _code_where(scan.doc, hit)
    evidence = [_cite(hit.text)]
    if frame is not None and frame.code:
        evidence.append(f"failing line {frame.where}: {frame.code}")
    fix: list[str] = []
    if hit.block is not None and hit.block.wrapped:
        evidence.append(
            f"in your collate_fn, run by {_in_worker(hit)}: a collate_fn receives a list of "
            "samples (one per index), not a dict or a batched tensor"
        )
        fix.append(
            'Index the samples one by one: `images = torch.stack([s["image"] for s in batch])`; '
            "or start with `batch = torch.utils.data.default_collate(batch)` and post-process"
        )
    elif hit.pattern == 0:
        evidence.append(
            f"the batch is a {m[1]}, not a dict: a Dataset that returns a tuple per sample makes "
            "default_collate return [inputs, targets, ...], indexable only by position"
        )
        fix.append("Unpack it by position: `images, labels = batch`")
        fix.append(
            'Or return a dict from `__getitem__` (`return {"image": x, "label": y}`): '
            "default_collate then yields a dict of batched tensors"
        )
    elif hit.pattern in (1, 4, 5) and (hit.pattern != 1 or m[1] == "str"):
        got = m[1] if hit.pattern == 1 else m[3] if hit.pattern == 4 else "str"
        evidence.append(
            f"a {got} arrived where a tensor was expected: iterating or unpacking a dict batch "
            "yields its keys (strings), and a tuple sample collates to a list"
        )
        fix.append('Take the tensors out by key: `x, y = batch["image"], batch["label"]`')
        fix.append(
            "Or make `__getitem__` return a tuple `(x, y)` if the loop unpacks `for x, y in loader`"
        )
    elif hit.pattern == 1 and m[1] == "dict":
        evidence.append(
            f"the batch is a dict of tensors; `.{m[2]}` exists only on the tensors inside it"
        )
        fix.append("`batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}`")
    elif hit.pattern == 1:
        evidence.append(
            f"the batch is a {m[1]} of tensors (default_collate keeps the sample's tuple "
            f"structure); `.{m[2]}` exists only on the tensors inside it"
        )
        fix.append("`batch = [t.to(device, non_blocking=True) for t in batch]`")
        fix.append("Or unpack first: `x, y = batch; x = x.to(device, non_blocking=True)`")
    elif hit.pattern == 2:
        evidence.append(f"the collated batch has no key {m[1].strip()}")
        fix.append(
            "Use the keys that `__getitem__` returns (print `batch.keys()` once), or rename them "
            "in the Dataset"
        )
    elif hit.pattern == 3:
        got = f"{m[3]}" if m[3] else ("more" if m[1] == "too many" else "fewer")
        evidence.append(
            f"the loop unpacks each batch into {m[2]} names but it holds {got} items "
            "(a dict batch unpacks to its keys)"
        )
        fix.append(
            "Match the names to what `__getitem__` returns, or take the batch whole "
            "(`for batch in loader:`) and index it"
        )
    shapes = _text(scan.ctx.last_batch_shapes)
    if shapes:
        evidence.append(f"last batch seen: {shapes}")
    return (
        _finding(
            "collate-structure",
            "error",
            "The batch's structure does not match how the training loop uses it",
            evidence,
            fix,
            frame.where if frame else None,
        ),
        (hit,),
    )


# --------------------------------------------------------------------------------------------
# shape-mismatch
# --------------------------------------------------------------------------------------------


def _shape_accept(doc: _Doc, hit: _Hit) -> bool:
    if hit.block is None:
        return True
    if hit.block.wrapped:
        return True
    return _innermost_user(_blocks_up(doc, hit.block)) is not None


def _shape_explain(hit: _Hit) -> tuple[list[str], list[str]]:
    m, p = hit.match, hit.pattern
    if p == 0:
        hi = int(m[2])
        return (
            [
                f"a tensor with {hi + 1} dimensions was asked for dimension {m[3]} "
                f"(valid: {m[1]}..{hi}): the data has one dimension fewer or more than the code "
                "assumes (often the batch or channel dimension)"
            ],
            ["Check `x.dim()` of the batch; add a missing dimension with `unsqueeze`"],
        )
    if p in (1, 2):
        rows, features, want, out = m[1], m[2], m[3], m[4]
        return (
            [
                f"the input has {features} features per row (batch of {rows}) but the layer "
                f"expects {want} (weight {want}x{out})"
            ],
            [
                f"Build the layer for the data: `nn.Linear({features}, {out})`, or "
                "`nn.LazyLinear` after a flatten; or reshape the input to the layer's size"
            ],
        )
    if p == 3:
        return (
            [f"{m[3]} needs {m[1]}D (unbatched) or {m[2]}D (batched) input, got [{m[4]}]"],
            [
                "Reshape the batch to [N, C, ...]: e.g. `x.view(-1, 1, 28, 28)` for flattened "
                "images, or `x.unsqueeze(1)` to add a channel dimension"
            ],
        )
    if p == 4:
        return (
            [f"{m[2]}D weight [{m[3]}] needs {m[1]}D input, got {m[4]}D input [{m[5]}]"],
            ["Reshape the batch to [N, C, H, W] before the convolution"],
        )
    if p == 5:
        return (
            [f"the layer expects {m[4]} input channels but the batch has {m[5]} (input [{m[3]}])"],
            [
                f"Build the first layer with `in_channels={m[5]}`, or convert the images "
                '(`img.convert("RGB")` / `x.expand(-1, 3, -1, -1)`)'
            ],
        )
    if p == 6:
        return (
            [f"two tensors differ in dimension {m[3]}: {m[1]} vs {m[2]} (e.g. output vs target)"],
            ["Compare the output and target shapes; make the output width match the target"],
        )
    if p == 7:
        return (
            [
                f"the model output has {m[1]} rows but the target has {m[2]}: a view/reshape "
                "folded another dimension into the batch"
            ],
            ["Keep the batch dimension first and explicit: `logits.view(x.size(0), -1)`"],
        )
    if p == 8:
        return (
            [
                f"view/reshape to [{m[1]}] cannot hold {m[2]} elements: often a hard-coded batch "
                "size meeting the last, smaller batch"
            ],
            [
                "Use -1 for the batch dimension: `x.view(x.size(0), -1)`; or "
                "`DataLoader(..., drop_last=True)`"
            ],
        )
    if p == 9:
        return (
            [
                f"BatchNorm got a batch of 1 sample in training mode (input [{m[1]}]): usually "
                "the last, incomplete batch (the dataset size is not a multiple of batch_size)"
            ],
            ["`DataLoader(..., drop_last=True)` for training"],
        )
    if p == 10:
        return (
            [f"BatchNorm was built for {m[1]} features but got {m[2]}"],
            ["Match `BatchNorm(num_features)` to the channels of its input"],
        )
    if p == 14:
        return (
            [
                f"permute got {m[2]} dimensions for a tensor that has {m[1]}: the data has a "
                "different number of dimensions than the code assumes"
            ],
            ["Check `x.dim()` where the tensor is made; add a missing dimension with `unsqueeze`"],
        )
    if p == 13:
        return (
            [f"the loss expected a target of size {m[1]} but got {m[2]}"],
            ["Make the target's shape match the output's"],
        )
    return (
        ["tensors of different sizes were concatenated or stacked in the training code"],
        ["Print the shapes of the tensors being joined"],
    )


def _build_shape(scan: _Scan) -> _Built | None:
    hits = [hit for hit in scan.hits if _shape_accept(scan.doc, hit)]
    if not hits:
        return None
    hit = hits[-1]
    frame = _code_where(scan.doc, hit)
    evidence = [_cite(hit.text)]
    explained, fix = _shape_explain(hit)
    evidence.extend(explained)
    worker = _in_worker(hit)
    if worker:
        evidence.append(f"raised in {worker}: in the Dataset or its transforms")
    inner = hit.block.frames[-1] if hit.block is not None and hit.block.frames else None
    if frame is not None and frame.code:
        evidence.append(f"at {frame.where}: {frame.code}")
    elif inner is not None and inner.code and inner.is_user:
        evidence.append(f"at {inner.where}: {inner.code}")
    shapes = _text(scan.ctx.last_batch_shapes)
    if shapes:
        evidence.append(f"last batch seen: {shapes}")
    if frame is not None:
        fix.append(f"Print the shapes just before {frame.where} (`print(x.shape)`) for one batch")
    return (
        _finding(
            "shape-mismatch",
            "error",
            "Tensor shapes do not match what the code expects",
            evidence,
            fix,
            frame.where if frame else None,
        ),
        (hit,),
    )


# --------------------------------------------------------------------------------------------
# cuda-oom
# --------------------------------------------------------------------------------------------

_OOM_NEW = re.compile(
    rf"CUDA out of memory\. Tried to allocate ({_SIZE})\. GPU (\d+) has a total capaci?ty of "
    rf"({_SIZE}) of which ({_SIZE}) is free\."
)
_OOM_OLD = re.compile(
    rf"CUDA out of memory\. Tried to allocate ({_SIZE}) \(GPU (\d+); ({_SIZE}) total capacity; "
    rf"({_SIZE}) already allocated; ({_SIZE}) free; (?:({_SIZE}) allowed; )?({_SIZE}) "
    r"(reserved in total by PyTorch|cached)\)"
)
_OOM_RAW = re.compile(
    r"CUDA error: out of memory|CUBLAS_STATUS_ALLOC_FAILED|cudaErrorMemoryAllocation"
    r"|CUDA_ERROR_OUT_OF_MEMORY"
)
_OOM_ANY = re.compile(r"CUDA out of memory")
_OOM_PROCESS = re.compile(rf"Process (\d+) has ({_SIZE}) memory in use")
_OOM_ALLOWED = re.compile(rf"({_SIZE}) allowed;")
_OOM_SELF = re.compile(rf"this process has ({_SIZE}) memory in use")
_OOM_SPLIT = re.compile(
    rf"Of the allocated memory ({_SIZE}) is allocated by PyTorch, (?:with ({_SIZE}) allocated in "
    rf"private pools \(e\.g\., CUDA Graphs\), )?and ({_SIZE}) is reserved by PyTorch but unallocated"
)


def _build_cuda_oom(scan: _Scan) -> _Built | None:
    if not scan.hits:
        return None
    detailed = [hit for hit in scan.hits if hit.pattern in (0, 1)]
    hit = (detailed or list(scan.hits))[-1]
    m = hit.match
    evidence = [_cite(hit.text)]
    fix: list[str] = []
    gpu = "?"
    fragmented = False
    others: list[tuple[str, str]] = []
    if hit.pattern in (0, 1):
        requested, gpu, total = _bytes(m[1]), m[2], _bytes(m[3])
        if hit.pattern == 0:
            free = _bytes(m[4])
            split = _OOM_SPLIT.search(hit.text)
            allocated = _bytes(split[1]) if split else None
            pools = _bytes(split[2]) if split else None
            unallocated = _bytes(split[3]) if split else None
            others = _OOM_PROCESS.findall(hit.text)
            mine = _OOM_SELF.search(hit.text)
        else:
            allocated, free, pools, mine = _bytes(m[4]), _bytes(m[5]), None, None
            reserved = _bytes(m[7])
            if m[8] == "cached" or reserved is None or allocated is None:
                unallocated = reserved  # torch < 1.5 printed the cached-but-unused amount
            else:
                unallocated = max(reserved - allocated, 0.0)
        if requested is not None and free is not None and total is not None:
            evidence.append(
                f"GPU {gpu}: requested {_fmt(requested)} with {_fmt(free)} free of {_fmt(total)}"
            )
        if allocated is not None and unallocated is not None:
            evidence.append(
                f"PyTorch held {_fmt(allocated)} in tensors and {_fmt(unallocated)} reserved but "
                "unallocated (cached)"
            )
        if mine:
            evidence.append(f"this process used {mine[1]} on the GPU in all")
        allowed = _OOM_ALLOWED.search(hit.text)
        if allowed:
            evidence.append(
                f"the process was capped at {allowed[1]} "
                "(`torch.cuda.set_per_process_memory_fraction`)"
            )
        if pools:
            evidence.append(f"{_fmt(pools)} sat in private pools (CUDA Graphs)")
        for pid, size in others:
            evidence.append(
                f"process {pid} also held {size} on GPU {gpu} (another job, or this one seen "
                "under its host PID inside a container)"
            )
        if requested is not None and unallocated is not None:
            fragmented = unallocated > 0 and unallocated >= requested
            if fragmented:
                evidence.append(
                    f"fragmentation: the cache held {_fmt(unallocated)} unused, at least the "
                    f"{_fmt(requested)} requested, but in pieces too small for it"
                )
            else:
                evidence.append(
                    f"not fragmentation: the {_fmt(requested)} requested is more than the "
                    f"{_fmt(unallocated)} cached — the step needs more memory than is left"
                )
        if requested is not None and total is not None and requested > total:
            evidence.append(
                f"one allocation ({_fmt(requested)}) is larger than the whole GPU ({_fmt(total)})"
            )
    else:
        evidence.append("the CUDA driver or a CUDA library could not allocate device memory")
    if fragmented:
        fix.append(
            "Set `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` in the job's environment "
            "(before CUDA starts) so the allocator can grow segments instead of splitting them; "
            "torch builds without it: `PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128`"
        )
    fix.append(
        "Lower the per-step batch size (e.g. halve it) and keep the effective batch with "
        "gradient accumulation"
    )
    fix.append(
        "Mixed precision: run the forward pass under "
        '`torch.autocast(device_type="cuda", dtype=torch.bfloat16)` (activations take about half)'
    )
    fix.append(
        "Activation checkpointing on the largest blocks: "
        "`torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)`"
    )
    if others:
        fix.append(
            f"Free GPU {gpu} from other processes (`nvidia-smi`) or pick another GPU with "
            "`CUDA_VISIBLE_DEVICES`"
        )
    frame = _code_where(scan.doc, hit)
    title = f"CUDA out of memory on GPU {gpu}" if gpu != "?" else "CUDA out of memory"
    if fragmented:
        title += " (fragmentation)"
    return (
        _finding("cuda-oom", "error", title, evidence, fix, frame.where if frame else None),
        (hit,),
    )


# --------------------------------------------------------------------------------------------
# worker-shm-limit
# --------------------------------------------------------------------------------------------


def _build_shm(scan: _Scan) -> _Built | None:
    if not scan.hits:
        return None
    ctx = scan.ctx
    best = min(scan.hits, key=lambda hit: (_SHM_RANK[hit.pattern], -hit.index))
    evidence = [_cite(best.text)]
    for hit in scan.hits:
        if hit is not best and hit.pattern in (0, 1, 3):
            evidence.append(_cite(hit.text))
    pids = sorted({hit.match[1] for hit in scan.hits if hit.pattern == 1})
    if pids:
        evidence.append(f"worker pid {', '.join(pids)} died of SIGBUS (Bus error)")
    workers = sorted({w for hit in scan.hits if (w := _in_worker(hit))})
    if workers:
        evidence.append(f"failed in {', '.join(workers)} while putting a batch in shared memory")
    size = _count(ctx.shm_size_bytes) or None
    peak = _count(ctx.shm_peak_used_bytes)
    if size is not None:
        note = " — Docker's default" if size == 64 * (1 << 20) else ""
        evidence.append(f"/dev/shm is {_fmt(size)}{note}")
    if peak is not None:
        line = f"peak /dev/shm use {_fmt(peak)}"
        if size is not None:
            line += f" ({_pct(peak, size)} of it)"
            if peak < 0.5 * size:
                line += (
                    "; well below the size, so shared memory may not be the cause (a SIGBUS also "
                    "comes from a memory-mapped file truncated under the reader)"
                )
        evidence.append(line)
    workers_n = _count(ctx.num_workers)
    if workers_n is not None:
        evidence.append(
            f"num_workers={workers_n}: about num_workers × prefetch_factor batches sit in "
            "/dev/shm at once"
        )
    fix = [
        'Docker: `docker run --shm-size=8g ...` (or `--ipc=host`); compose: `shm_size: "8gb"`',
        "Kubernetes: mount an `emptyDir` with `medium: Memory` (and a `sizeLimit`) at /dev/shm",
        "Or need less of it: fewer `num_workers`, `prefetch_factor=1` (default 2), smaller batches",
    ]
    return (
        _finding(
            "worker-shm-limit",
            "error",
            "DataLoader workers ran out of shared memory (/dev/shm)",
            evidence,
            fix,
            _loop_where(scan.doc, best),
        ),
        tuple(scan.hits),
    )


_SHM_RANK = {1: 0, 3: 1, 2: 2, 0: 3, 4: 4, 5: 5, 6: 6}  # the cited line: most telling first


# --------------------------------------------------------------------------------------------
# worker-fd-limit
# --------------------------------------------------------------------------------------------


_EMFILE_PATH = re.compile(r"Too many open files: '([^']+)'")


def _fd_accept(hit: _Hit) -> bool:
    if hit.pattern != 2:
        return True
    errno, reason = hit.match[3], hit.match[2] or ""
    return errno is None or errno == "24" or "Too many open files" in reason


def _fd_where(hit: _Hit) -> str:
    funcs = _frame_funcs(hit.block)
    worker = _in_worker(hit)
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


def _build_fd(scan: _Scan) -> _Built | None:
    hits = [hit for hit in scan.hits if _fd_accept(hit)]
    if not hits:
        return None
    ctx = scan.ctx
    best = min(hits, key=lambda hit: (hit.pattern, -hit.index))
    evidence = [_cite(best.text)]
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
        and bool(_frame_funcs(hit.block) & {"_feed", "_serve"})
        for hit in hits
    )
    if background:
        evidence.append(
            "the errors are only in background threads: the batch is never delivered, so the "
            "loader hangs instead of crashing"
        )
    soft, hard = _count(ctx.nofile_soft), _count(ctx.nofile_hard)
    if soft is not None or hard is not None:
        evidence.append(
            f"RLIMIT_NOFILE soft {soft if soft is not None else 'unknown'}, "
            f"hard {hard if hard is not None else 'unknown'}"
        )
    peak = _count(ctx.max_open_fds)
    if peak is not None:
        line = f"peak open file descriptors {peak}"
        if soft:
            line += f" ({_pct(peak, soft)} of the soft limit)"
        evidence.append(line)
    strategy, source = _strategy(scan.doc, ctx)
    if strategy:
        evidence.append(f"sharing strategy {strategy} ({source})")
        if strategy == "file_descriptor":
            evidence.append(
                "with file_descriptor sharing every tensor of every batch in flight holds an open "
                "descriptor"
            )
    workers = _count(ctx.num_workers)
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
        _finding("worker-fd-limit", "error", title, evidence, fix, _loop_where(scan.doc, best)),
        tuple(hits),
    )


# --------------------------------------------------------------------------------------------
# worker-killed
# --------------------------------------------------------------------------------------------

_KILLED_RANK = {0: 0, 1: 1, 3: 2, 2: 3}


def _build_killed(scan: _Scan) -> _Built | None:
    hits = list(scan.hits)
    specific = [hit for hit in hits if hit.pattern in (0, 1, 3)]
    explainer = next((i for i in ("worker-shm-limit", "worker-fd-limit") if i in scan.fired), None)
    if not specific and explainer:
        return None  # "exited unexpectedly" after a bus error or EMFILE: already explained
    if not hits:
        return None
    ctx = scan.ctx
    best = min(hits, key=lambda hit: (_KILLED_RANK[hit.pattern], -hit.index))
    evidence = [_cite(best.text)]
    signals = {hit.match[1]: hit.match[2].strip() for hit in hits if hit.pattern == 0}
    codes = {hit.match[1]: hit.match[2] for hit in hits if hit.pattern == 1}
    native = sorted({hit.match[1] for hit in hits if hit.pattern == 3})
    pids = sorted(
        set(signals)
        | set(codes)
        | {p.strip() for hit in hits if hit.pattern == 2 for p in hit.match[1].split(",")} - {""}
    )
    for pid, name in signals.items():
        evidence.append(f"worker pid {pid} was killed by signal: {name}")
    for pid, code in codes.items():
        evidence.append(
            f"worker pid {pid} called exit({code}); its own error was not printed (rerun with "
            "num_workers=0 to see it)"
        )
    if native:
        evidence.append(f"the worker reported a {', '.join(native)}: a native crash in the worker")
    if not signals and not codes and not native:
        evidence.append(f"worker pid {', '.join(pids) or '?'} died without a reported cause")
    sigkill = any(name == "Killed" for name in signals.values())
    pressure = _memory_pressure(ctx)
    fix: list[str] = []
    title = "A DataLoader worker exited unexpectedly"
    if signals:
        title = (
            f"A DataLoader worker was killed by signal ({', '.join(sorted(set(signals.values())))})"
        )
    if sigkill:
        evidence.extend(pressure.evidence)
        if pressure.near:
            evidence.append(
                "SIGKILL with memory near the limit: the kernel OOM killer most likely killed it"
            )
            title = "A DataLoader worker was killed, most likely by the OOM killer"
        elif pressure.near is False:
            evidence.append(
                "memory was not near the limit: something else sent SIGKILL (a scheduler, a "
                "watchdog, `kill -9`)"
            )
        else:
            evidence.append(
                "SIGKILL is what the kernel OOM killer sends; memory was not measured — check "
                "`dmesg -T | grep -i -E 'killed process|out of memory'`"
            )
        if pressure.near is not False:
            fix.append(
                "Cut worker memory: fewer `num_workers`, `prefetch_factor=1`; keep per-sample "
                "metadata in numpy arrays or tensors rather than Python lists/dicts (workers "
                "copy every Python object they touch)"
            )
            fix.append(
                "Or raise the memory limit (Docker `--memory`, Kubernetes "
                "`resources.limits.memory`, SLURM `--mem`)"
            )
    elif worker_rss := _count(ctx.worker_peak_rss_bytes):
        evidence.append(f"a DataLoader worker peaked at {_fmt(worker_rss)} RSS")
    if native or any(name in ("Segmentation fault", "Aborted") for name in signals.values()):
        fix.append(
            "Open file handles and native libraries (h5py, lmdb, cv2) inside `__getitem__` or "
            "`worker_init_fn`, not in `__init__` (handles do not survive fork); or "
            '`DataLoader(..., multiprocessing_context="spawn")`'
        )
    fix.append(
        "Rerun with `num_workers=0` once to see the worker's real error, then restore the workers"
    )
    if explainer:
        evidence.append(f"see also {explainer}")
    return (
        _finding("worker-killed", "error", title, evidence, fix, _loop_where(scan.doc, best)),
        tuple(hits),
    )


# --------------------------------------------------------------------------------------------
# host-oom
# --------------------------------------------------------------------------------------------


def _build_host_oom(scan: _Scan) -> _Built | None:
    ctx = scan.ctx
    signal = (_text(ctx.signal) or "").upper()
    code = ctx.exit_code if isinstance(ctx.exit_code, int) else None
    sigkill = code in (137, -9) or signal in ("SIGKILL", "KILL", "9")
    if not sigkill:
        return None
    pressure = _memory_pressure(ctx)
    if not pressure.near:
        return None  # SIGKILL far from the limit (or unmeasured) is not evidence of an OOM kill
    evidence = [_cite(hit.text) for hit in scan.hits[-2:]]
    status = f"exit code {code}" if code is not None else "killed"
    if signal:
        status += f", signal {signal}"
    evidence.append(f"job {status}: SIGKILL, which is what the kernel OOM killer sends")
    evidence.extend(pressure.evidence)
    fix = [
        "Cut host memory: fewer `num_workers` and `prefetch_factor=1`; load samples lazily or "
        "memory-map them instead of holding the dataset in RAM; keep metadata in numpy arrays "
        "rather than Python lists (each worker copies the objects it touches)",
        "Or raise the limit: Docker `--memory`, Kubernetes `resources.limits.memory`, SLURM `--mem`",
        "Confirm with `dmesg -T | grep -i -E 'killed process|out of memory'`",
    ]
    return (
        _finding(
            "host-oom",
            "error",
            "The job was killed by the kernel's OOM killer (host memory)",
            evidence,
            fix,
            None,
        ),
        tuple(scan.hits),
    )


# --------------------------------------------------------------------------------------------
# worker-reset
# --------------------------------------------------------------------------------------------

_CAUSES = ("worker-killed", "worker-fd-limit", "worker-shm-limit", "host-oom")


def _teardown(hit: _Hit) -> bool:
    block = hit.block
    if block is None:
        return False
    return bool(_frame_funcs(block) & {"__del__", "_shutdown_workers"}) or (
        "__del__" in block.preamble
    )


def _build_reset(scan: _Scan) -> _Built | None:
    hits = list(scan.hits)
    if not hits:
        return None
    ctx = scan.ctx
    last = hits[-1]
    evidence = [_cite(last.text)]
    if len(hits) > 1:
        evidence.append(f"{len(hits)} occurrences")
    cause = next((i for i in _CAUSES if i in scan.fired), None)
    if all(_teardown(hit) for hit in hits):
        evidence.append(
            "raised only in `__del__` → `_shutdown_workers`, while a finished iterator was being "
            "cleaned up after its workers had exited: it does not affect training"
        )
        if ctx.exit_code == 0:
            evidence.append("the job exited 0")
        return (
            _finding(
                "worker-reset",
                "info",
                "ConnectionResetError at DataLoader teardown is harmless",
                evidence,
                [
                    "Nothing to fix. Keep `num_workers`: setting it to 0 only makes loading serial "
                    "and slow"
                ],
                None,
            ),
            tuple(hits),
        )
    if cause:
        evidence.append(
            f"the main process lost the socket to a worker that had already failed ({cause})"
        )
        return (
            _finding(
                "worker-reset",
                "info",
                f"ConnectionResetError is a symptom of {cause}",
                evidence,
                [f"Fix {cause}; this error goes away with it"],
                None,
            ),
            tuple(hits),
        )
    funcs = set().union(*(_frame_funcs(hit.block) for hit in hits))
    if funcs & {"rebuild_storage_fd", "detach", "recvfds", "get_connection"}:
        evidence.append(
            "raised while receiving a batch's shared tensor from a worker (file_descriptor "
            "sharing): the worker's end of the socket was gone"
        )
    if "_pin_memory_loop" in funcs:
        evidence.append("raised in the pin-memory thread")
    soft, hard = _count(ctx.nofile_soft), _count(ctx.nofile_hard)
    if soft is not None:
        evidence.append(
            f"RLIMIT_NOFILE soft {soft}, hard {hard if hard is not None else 'unknown'}"
        )
    evidence.extend(_memory_pressure(ctx).evidence)
    severity: Severity = "warning" if ctx.exit_code == 0 else "error"
    fix = [
        "Look for the worker's own failure first (killed by a signal, out of memory, open-files "
        "limit): the reset is how the main process notices it",
        "If workers run out of descriptors: raise `ulimit -n`, or "
        '`torch.multiprocessing.set_sharing_strategy("file_system")`',
        "Do not 'fix' it with num_workers=0: that hides the cause and makes loading serial",
    ]
    return (
        _finding(
            "worker-reset",
            severity,
            "The connection to a DataLoader worker was reset mid-training",
            evidence,
            fix,
            _loop_where(scan.doc, last),
        ),
        tuple(hits),
    )


# --------------------------------------------------------------------------------------------
# The table, most specific first (a line used by a row is not offered to the rows below it)
# --------------------------------------------------------------------------------------------


def _rx(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p) for p in patterns)


SIGNATURES: tuple[Signature, ...] = (
    Signature(
        "ragged-batch",
        (
            "stack expects each tensor",
            "Sizes of tensors must match",
            "resize storage that is not resizable",
        ),
        (_STACK, _SIZES_OLD, _RESIZE),
        _build_ragged,
    ),
    Signature(
        "collate-structure",
        (
            "indices must be integers",
            "object has no attribute",
            "KeyError",
            "values to unpack",
            "must be Tensor, not",
            "string indices must be",
        ),
        _rx(
            r"^TypeError: (list|tuple) indices must be integers or slices, not (str|tuple|dict|list)",
            rf"^AttributeError: '(list|tuple|dict|str)' object has no attribute '({_TENSOR_ATTRS})'",
            r"^KeyError: (.+)$",
            r"^ValueError: (too many|not enough) values to unpack \(expected (\d+)(?:, got (\d+))?\)",
            r"^TypeError: (\w+)\(\): argument '(\w+)' (?:\(position \d+\) )?must be Tensor, "
            r"not (str|list|dict|tuple)",
            r"^TypeError: string indices must be integers",
        ),
        _build_collate,
    ),
    Signature(
        "shape-mismatch",
        (
            "Dimension out of range",
            "cannot be multiplied",
            "size mismatch, m1",
            "Expected ",
            "Given groups",
            "must match the size of tensor",
            "is invalid for input of size",
            "running_mean should contain",
            "Sizes of tensors must match",
            "stack expects each",
            "is not equal to len(dims)",
        ),
        _rx(
            r"Dimension out of range \(expected to be in range of \[(-?\d+), (-?\d+)\], "
            r"but got (-?\d+)\)",
            r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)",
            r"size mismatch, m1: \[(\d+) x (\d+)\], m2: \[(\d+) x (\d+)\]",
            r"Expected (\d+)D \(unbatched\) or (\d+)D \(batched\) input to (\w+), "
            r"but got input of size: \[([^\]]*)\]",
            r"Expected (\d+)-dimensional input for (\d+)-dimensional weight \[([^\]]*)\], "
            r"but got (\d+)-dimensional input of size \[([^\]]*)\] instead",
            r"Given groups=(\d+), weight of size \[([^\]]*)\], expected input\[([^\]]*)\] "
            r"to have (\d+) channels, but got (\d+) channels instead",
            r"The size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) "
            r"at non-singleton dimension (\d+)",
            r"Expected input batch_size \((\d+)\) to match target batch_size \((\d+)\)",
            r"shape '\[([^\]]*)\]' is invalid for input of size (\d+)",
            r"Expected more than 1 value per channel when training, got input size "
            r"(?:torch\.Size\()?\[([^\]]*)\]",
            r"running_mean should contain (\d+) elements not (\d+)",
            r"Sizes of tensors must match except in dimension (\d+)",
            r"stack expects each tensor to be equal size",
            r"Expected target size (\[[^\]]*\]|\([^)]*\)), got (\[[^\]]*\]|\([^)]*\))",
            r"input\.dim\(\) = (\d+) is not equal to len\(dims\) = (\d+)",
        ),
        _build_shape,
    ),
    Signature(
        "cuda-oom",
        (
            "out of memory",
            "CUBLAS_STATUS_ALLOC_FAILED",
            "cudaErrorMemoryAllocation",
            "CUDA_ERROR_OUT_OF_MEMORY",
        ),
        (_OOM_NEW, _OOM_OLD, _OOM_RAW, _OOM_ANY),
        _build_cuda_oom,
    ),
    Signature(
        "worker-shm-limit",
        (
            "bus error",
            "Bus error",
            "out of shared memory",
            "No space left on device",
            "unable to write to file <",
            "insufficient shared memory",
        ),
        _rx(
            r"Unexpected bus error encountered in worker",
            r"DataLoader worker \(pid (\d+)\) is killed by signal: Bus error",
            r"out of shared memory",
            r"unable to [^<]{1,60}<(/?torch_[^>]*)>[^:]{0,80}: No space left on device",
            r"unable to write to file <(/?torch_[^>]*)>",
            r"No space left on device.{0,200}/dev/shm|/dev/shm.{0,200}No space left on device",
            r"insufficient shared memory",
        ),
        _build_shm,
    ),
    Signature(
        "worker-fd-limit",
        (
            "Too many open files",
            "ancdata",
            "unable to open shared memory object",
            "EMFILE",
            "Errno 24",
        ),
        _rx(
            r"Too many open files\. Communication with the workers is no longer possible",
            r"received (\d+) items of ancdata",
            r"unable to open shared memory object <(/?torch_[^>]*)> in read-write mode"
            r"(?:: ([^()]*?) \((\d+)\))?",
            r"\[Errno 24\]|Too many open files|\bEMFILE\b",
        ),
        _build_fd,
    ),
    Signature(
        "worker-killed",
        ("DataLoader worker", "encountered in worker"),
        _rx(
            r"DataLoader worker \(pid (\d+)\) is killed by signal: ([^.]+)\.",
            r"DataLoader worker \(pid (\d+)\) exited unexpectedly with exit code (-?\d+)",
            r"DataLoader worker \(pid\(s\) ([\d, ]+)\) exited unexpectedly",
            r"Unexpected (segmentation fault|floating-point exception) encountered in worker",
        ),
        _build_killed,
    ),
    Signature(
        "host-oom",
        ("Killed", "Out of memory", "oom-kill"),
        _rx(r"^Killed$", r"Out of memory: Kill(?:ed)? process (\d+)", r"oom-kill"),
        _build_host_oom,
    ),
    Signature(
        "worker-reset",
        ("ConnectionResetError", "Connection reset by peer"),
        _rx(
            r"ConnectionResetError: \[Errno 104\] Connection reset by peer",
            r"ConnectionResetError\(104, 'Connection reset by peer'\)",
            r"\[Errno 104\] Connection reset by peer",
        ),
        _build_reset,
    ),
)
