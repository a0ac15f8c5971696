"""The job ended on an uncaught exception that no more specific signature explains.

Whatever its type (a plain ``KeyError`` in a Dataset's ``__getitem__``, a ``ValueError`` in the
loop's own code), in the main process or in a DataLoader worker: the exception, the user's frame
that raised it and the exit code are the first thing a report says; the throughput of the
steps before it comes after. Tried last: a signature that knows the message says more.

Anti-pattern::

    self.label_of = {s: k for k, s in enumerate(speakers_of_first_shard)}
    ...
    return feats, self.label_of[speaker]  # KeyError for a speaker of another shard

Best practice::

    self.label_of = {s: k for k, s in enumerate(all_speakers)}  # built from the whole manifest
"""

from __future__ import annotations

import re

from trainprof.analysis.crash.common import innermost_user, make_finding
from trainprof.analysis.crash.row import Built, Scan
from trainprof.analysis.crash.traceback import Block, Doc, Frame, parse
from trainprof.analysis.crash.units import cite
from trainprof.analysis.rules.registry import signature

HEADER = "Traceback (most recent call last):"
# An exception line: the type (dotted or not), then its message.
_EXCEPTION = re.compile(
    r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|\w*))(?::\s?(.*))?$"
)
# Not a crash of the job's code: a stop asked from outside, or an exit it chose.
_NOT_A_CRASH = frozenset({"KeyboardInterrupt", "SystemExit", "GeneratorExit", "BrokenPipeError"})
# A worker's traceback that torch re-raised as one escaped line (a KeyError's message is its repr).
_ESCAPED_WORKER = re.compile(
    r"Caught \w+ in DataLoader worker process (\d+)\.\\nOriginal Traceback"
)
FIXES = {
    "KeyError": "the key is missing from the mapping: build it from all the data the job can "
    "reach (every shard, split or class), or map an unknown key to a default (dict.get)",
    "IndexError": "an index runs past its sequence: check the lengths the code assumes "
    "(len(dataset), the number of classes, a tensor's size) against the data",
    "ValueError": "a value outside what the call accepts: guard the edge that reaches it (a zero, "
    "a negative, an empty batch) or validate the data before training",
    "TypeError": "a value of the wrong type reaches the call: check what the Dataset or the loop "
    "passes there (None, a list for a tensor, a str for a number)",
    "AttributeError": "the object lacks the attribute: check its type where it is made (a "
    "wrapped model: model.module.x; a None returned earlier)",
    "FileNotFoundError": "a path the job reads does not exist: check it before training, for "
    "every entry of the manifest",
    "ZeroDivisionError": "a division by zero: guard the denominator (an empty batch, a step 0)",
    "AssertionError": "an assertion of the code failed: the data or the state it checks is not "
    "what it assumed",
}


@signature(
    id="uncaught-exception",
    examples=("crash_worker_keyerror", "crash_main_valueerror"),
    title="The job ended on an uncaught exception",
    order=990,  # last: every signature that knows the message says more
    needles=(HEADER,),
    patterns=(re.compile(re.escape(HEADER)),),
)
def build(scan: Scan) -> Built | None:
    code = scan.ctx.exit_code
    if not scan.hits or not isinstance(code, int) or code == 0:
        return None
    if any(f.severity == "error" for f in scan.fired.values()):
        return None  # a signature named the cause
    doc = scan.doc
    found = _final(doc)
    if found is None:
        return None
    doc, block, line, worker = found
    m = _EXCEPTION.match(line)
    kind = m[1].rsplit(".", 1)[-1] if m else ""
    if not m or kind in _NOT_A_CRASH:
        return None
    frame = _raiser(doc, block)
    where = f"{frame.where} ({_function(block, frame)})" if frame is not None else None
    place = f"DataLoader worker {worker}" if worker is not None else "the main process"
    said = f" ({m[2].strip()})" if m[2] and m[2].strip() else ""
    quoted = line if line in doc_text(scan.doc) else line.replace("'", "\\'")
    evidence = [cite(quoted), f"an uncaught {kind}{said}, raised in {place}"]
    if frame is not None:
        said = f": {frame.code}" if frame.code else ""
        evidence.append(f"the user's frame that raised it: {frame.where} in {frame.func}{said}")
    evidence.append(f"the job exited with code {code}; no known signature matched its message")
    fix = [FIXES.get(kind, f"fix what raised the {kind} at {where or 'the last frame shown'}")]
    if where is not None:
        fix.append(f"reproduce it outside training: run the code at {where} on the same input")
    if worker is not None:
        fix.append("with num_workers=0 the exception is raised in the main process, under pdb")
    hit = scan.hits[-1]
    title = f"The job ended on an uncaught {kind}" + (f" in {place}" if worker is not None else "")
    return make_finding("uncaught-exception", "error", title, evidence, fix, where), (hit,)


def _final(doc: Doc) -> tuple[Doc, Block, str, int | None] | None:
    """The last traceback's block, its exception line and the worker that raised it: a worker's
    original traceback where torch re-raised one, read from its escaped message too."""
    blocks = [b for b in doc.blocks if b.exc is not None]
    if not blocks:
        return None
    block = blocks[-1]
    assert block.exc is not None
    line = doc.lines[block.exc].strip()
    escaped = _ESCAPED_WORKER.search(line)
    if escaped is not None:
        inner = parse(_unescape(line[line.index("Original Traceback") :]))
        inner_blocks = [b for b in inner.blocks if b.exc is not None]
        if inner_blocks:
            b = inner_blocks[-1]
            assert b.exc is not None
            text = inner.lines[b.exc].strip()
            return inner, b, text, int(escaped[1])
    return doc, block, line, block.worker if block.wrapped else None


def doc_text(doc: Doc) -> str:
    """The output's lines, as one text to find a quote in."""
    return "\n".join(doc.lines)


def _unescape(text: str) -> str:
    return text.replace("\\n", "\n").replace("\\'", "'").replace('\\"', '"')


def _function(block: Block, frame: Frame) -> str:
    """The frame's function as a reader finds it: a comprehension or lambda is its caller's,
    the frame printed just above it in the same file."""
    if not frame.func.startswith("<") or frame not in block.frames:
        return frame.func
    at = block.frames.index(frame)
    caller = block.frames[at - 1] if at > 0 else None
    return caller.func if caller is not None and caller.path == frame.path else frame.func


def _raiser(doc: Doc, block: Block) -> Frame | None:
    """The innermost user frame of the block, else of the blocks that re-raised it."""
    chain: list[Block | None] = [block]
    parent = block.parent
    while parent is not None and len(chain) < 8:
        chain.append(doc.blocks[parent])
        parent = doc.blocks[parent].parent
    return innermost_user(tuple(chain))
