"""Samples of different sizes break default_collate.

The samples of one batch have different shapes, and the default collate stacks only samples of
one shape (``torch.stack``). In a worker, torch may say it another way: the collate sized its
shared memory for same-sized samples, and a storage "is not resizable".

Anti-pattern::

    DataLoader(clips_of_varying_length, batch_size=8)

Best practice::

    DataLoader(..., collate_fn=lambda b: pad_sequence(b, batch_first=True))
"""

from __future__ import annotations

import re

from trainprof.analysis.crash.common import blocks_up, code_where, in_worker, make_finding
from trainprof.analysis.crash.row import Built, Hit, Scan
from trainprof.analysis.crash.traceback import Doc
from trainprof.analysis.crash.units import cite, measured_text
from trainprof.analysis.rules.registry import signature

STACK = re.compile(
    r"stack expects each tensor to be equal size, but got (\[[^\]]*\]) at entry (\d+) "
    r"and (\[[^\]]*\]) at entry (\d+)"
)
# In a worker, default_collate stacks into shared memory sized for the batch it expects; a
# sample of another size then fails with this text instead of "stack expects ...".
RESIZE = re.compile(r"Trying to resize storage that is not resizable")
SIZES_OLD = re.compile(
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


def _in_collate(doc: Doc, hit: Hit) -> bool:
    if hit.block is None:
        return True  # the bare message (e.g. from the probe): collate is by far the usual source
    for block in blocks_up(doc, hit.block):
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


NEEDLES = (
    "stack expects each tensor",
    "Sizes of tensors must match",
    "resize storage that is not resizable",
)


@signature(
    id="ragged-batch",
    examples=("crash_ragged", "crash_ragged_short"),
    title="Samples of different sizes break default_collate",
    order=10,
    needles=NEEDLES,
    patterns=(STACK, SIZES_OLD, RESIZE),
)
def build(scan: Scan) -> Built | None:
    hits = [hit for hit in scan.hits if _in_collate(scan.doc, hit)]
    if not hits:
        return None
    hit = hits[-1]
    evidence = [cite(hit.text)]
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
    where = in_worker(hit)
    evidence.append(
        "raised while collating a batch"
        + (f" in {where}" if where else "")
        + " (default_collate stacks same-shaped samples with torch.stack)"
    )
    shapes = measured_text(scan.ctx.last_batch_shapes)
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
    frame = code_where(scan.doc, hit)
    return (
        make_finding(
            "ragged-batch",
            "error",
            "Samples in a batch have different shapes, so the default collate cannot stack them",
            evidence,
            fix,
            frame.where if frame else None,
        ),
        (hit,),
    )
