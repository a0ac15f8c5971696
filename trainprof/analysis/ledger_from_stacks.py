"""The time ledger split by stack samples alone: data, stalls by cause, then forward, backward,
optimizer, logging and loop code."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from trainprof.analysis import attribution, ledger
from trainprof.analysis.ledger import BUCKETS, Ledger
from trainprof.analysis.stalls import (
    Segment,
    Stall,
)
from trainprof.store.stacks import StackSpan

_STALL_BUCKET = {**ledger.STALL_BUCKET, "eval": "eval", "checkpoint": "save"}
_CATEGORY_BUCKET = {**ledger.CATEGORY_BUCKET, "save": "save"}


def category_runs(
    spans: Sequence[StackSpan], source: dict[tuple[str, int], str], cat: str
) -> list[Segment]:
    """Consecutive spans in one category, merged (a torch.save call seen as one segment)."""
    category = attribution.categoriser(source)
    out: list[Segment] = []
    for s in spans:
        if category(s.frames) != cat:
            continue
        if out and s.t0 - out[-1].t1 < 0.05:
            out[-1] = Segment(out[-1].t0, s.t1)
        else:
            out.append(Segment(s.t0, s.t1))
    return out


def build_ledger(
    spans: Sequence[StackSpan],
    source: dict[tuple[str, int], str],
    window: tuple[float, float],
    stalls: Sequence[Stall],
) -> Ledger:
    # the user's own tensor code before the backward call is the forward, as `run` splits it
    plain = attribution.categoriser(source)
    category = attribution.by_position(
        plain, attribution.backward_sites(spans, source, False, plain), source
    )
    seconds = dict.fromkeys(BUCKETS, 0.0)
    windows = sorted((st.t0, st.t1, st) for st in stalls)
    starts = [w[0] for w in windows]
    for s in spans:
        lo, hi = max(s.t0, window[0]), min(s.t1, window[1])
        if hi <= lo:
            continue
        cat = category(s.frames)
        bucket = (
            attribution.data_part(s.frames) if cat == "data" else _CATEGORY_BUCKET.get(cat, "loop")
        )
        # The part inside a stall goes to the stall's bucket, beyond one typical step.
        i = bisect.bisect_right(starts, lo) - 1
        if i >= 0 and windows[i][1] > lo:
            st = windows[i][2]
            stall_bucket = _STALL_BUCKET.get(st.cause)
            if stall_bucket is not None:
                share = st.excess_s / max(1e-9, st.t1 - st.t0)
                seconds[stall_bucket] += (hi - lo) * share
                seconds[bucket] += (hi - lo) * (1 - share)
                continue
        seconds[bucket] += hi - lo
    covered = sum(seconds.values())
    total = window[1] - window[0]
    seconds["unattributed"] = max(0.0, total - covered)
    return Ledger(total, seconds, "stack samples")


def shares_of(led: Ledger) -> dict[str, float]:
    """Main-thread shares by activity (view.SHARES) from the ledger."""
    g = led.share
    return {
        "data": g("sampler", "worker_start", "fetch", "collate", "pin", "transfer", "data_wait"),
        "sampler": g("sampler"),
        "forward": g("forward"),
        "backward": g("backward"),
        "optimizer": g("optimizer"),
        "anomaly": g("anomaly"),
        "save": g("save"),
        "eval": g("eval"),
        "logging": g("logging"),
        "compile": g("compile"),
        "idle": g("idle", "stall_blocked"),
        "other": g("loop", "sync", "stall_compute"),
    }
