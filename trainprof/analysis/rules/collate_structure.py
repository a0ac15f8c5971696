"""A custom collate_fn returns or indexes the wrong structure.

The batch's structure (tuple, list, dict, key names) is not what the training loop or a custom
collate_fn expects of it.

Anti-pattern::

    collate_fn=lambda batch: batch[0]['x']  # a list of dicts, indexed as one dict

Best practice::

    collate_fn=lambda batch: {k: torch.stack([b[k] for b in batch]) for k in batch[0]}
"""

from __future__ import annotations

import re

from trainprof.analysis.crash.common import code_where, in_worker, make_finding
from trainprof.analysis.crash.row import Built, Hit, Scan
from trainprof.analysis.crash.traceback import Block
from trainprof.analysis.crash.units import cite, measured_text
from trainprof.analysis.rules.registry import signature

TENSOR_ATTRS = (
    "to|cuda|cpu|float|half|double|long|int|bool|bfloat16|size|shape|view|reshape|unsqueeze|"
    "squeeze|permute|numel|dim|ndim|device|dtype|contiguous|detach|numpy|pin_memory|type|flatten"
)
_BATCHY_SUBSCRIPT = re.compile(
    r"\b(?:batch|data|sample|samples|inputs?|targets?|labels?|features|example|examples|record|"
    r"item|items|b|x|y|xb|yb|mb|minibatch)\w*\s*\["
)


def _user_collate_fn(block: Block) -> bool:
    """The innermost frame is a user function called by DataLoader's fetcher: the collate_fn."""
    frames = block.frames
    return (
        len(frames) >= 2
        and frames[-1].is_user
        and frames[-2].func == "fetch"
        and frames[-2].path.endswith("fetch.py")
    )


def _collate_accept(hit: Hit) -> bool:
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


NEEDLES = (
    "indices must be integers",
    "object has no attribute",
    "KeyError",
    "values to unpack",
    "must be Tensor, not",
    "string indices must be",
)
PATTERNS = tuple(
    re.compile(p)
    for p in (
        r"^TypeError: (list|tuple) indices must be integers or slices, not (str|tuple|dict|list)",
        rf"^AttributeError: '(list|tuple|dict|str)' object has no attribute '({TENSOR_ATTRS})'",
        r"^KeyError: (.+)$",
        r"^ValueError: (too many|not enough) values to unpack \(expected (\d+)(?:, got (\d+))?\)",
        r"^TypeError: (\w+)\(\): argument '(\w+)' (?:\(position \d+\) )?must be Tensor, "
        r"not (str|list|dict|tuple)",
        r"^TypeError: string indices must be integers",
    )
)


@signature(
    id="collate-structure",
    title="A custom collate_fn returns or indexes the wrong structure",
    order=20,
    needles=NEEDLES,
    patterns=PATTERNS,
)
def build(scan: Scan) -> Built | None:
    hits = [hit for hit in scan.hits if _collate_accept(hit)]
    if not hits:
        return None
    hit = hits[-1]
    m = hit.match
    frame = code_where(scan.doc, hit)
    evidence = [cite(hit.text)]
    if frame is not None and frame.code:
        evidence.append(f"failing line {frame.where}: {frame.code}")
    fix: list[str] = []
    if hit.block is not None and hit.block.wrapped:
        evidence.append(
            f"in your collate_fn, run by {in_worker(hit)}: a collate_fn receives a list of "
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
    shapes = measured_text(scan.ctx.last_batch_shapes)
    if shapes:
        evidence.append(f"last batch seen: {shapes}")
    return (
        make_finding(
            "collate-structure",
            "error",
            "The batch's structure does not match how the training loop uses it",
            evidence,
            fix,
            frame.where if frame else None,
        ),
        (hit,),
    )
