"""Straggler rank: one torchrun rank is slower than the others, and in synchronous data-parallel
training every other rank waits for it in each collective (DDP's gradient all-reduce): the
whole job runs at the slowest rank's pace. The cause can be anything that rank does more of:
its data loading, CPU work only it does (metrics, logging or checkpointing on rank 0), a bigger
shard, a throttled GPU. The other ranks' profiles show only waiting; the slow rank's profile
shows its cause, but not that everyone else waits for it.

Anti-pattern::

    loss.backward(); opt.step()
    if dist.get_rank() == 0:
        metrics.update(logits.tolist(), y.tolist())   # every step, in Python, rank 0 only
        torch.save(model.state_dict(), "ckpt.pt")     # the others wait in the next all-reduce

Best practice::

    acc += (logits.argmax(1) == y).sum()              # on every rank, as a tensor
    if step % 200 == 0:
        dist.all_reduce(acc)                          # one reduce every N steps
    sampler = DistributedSampler(dataset, drop_last=True)   # equal shards
"""

from __future__ import annotations

from trainprof.analysis.attribution import Profile
from trainprof.analysis.call_sites import enclosing
from trainprof.analysis.findings import Finding
from trainprof.analysis.ledger import DATA, Ledger
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.ranks import RankView, Spread, spread, unmeasured_reason
from trainprof.analysis.rules._common import STEP_BUCKETS, ms
from trainprof.analysis.rules.registry import Threshold, rule
from trainprof.units import plural

EXTRA_WAIT = Threshold(
    "extra_wait",
    0.20,
    "share",
    "without collective timings: one rank's data wait beyond the median rank's, of a step",
)
LOST = Threshold(
    "lost",
    0.15,
    "share",
    "the other ranks' wait in collectives beyond the slowest rank's own, of a step",
)
MIN_LOST = Threshold("min_lost", 0.001, "s", "and at least this long per step")
GPU_BUSIER = Threshold(
    "gpu_busier",
    15.0,
    "%",
    "its GPU busier than the median other rank's by this many percentage points: a slower GPU",
)

CAUSE_BUCKETS = {
    "data": DATA,
    "checkpoint": ("save",),
    "logging": ("logging",),
    "cpu": ("loop", "stall_compute", "sync"),
}


@rule(
    id="straggler-rank",
    examples=("dist_metrics_straggler", "dist_data_straggler"),
    title="Straggler rank",
    family="distributed",
    per_rank=False,
    needs=("steps", "ranks"),
    claims=STEP_BUCKETS + DATA + ("save", "stall_compute"),
    thresholds=(LOST, MIN_LOST, EXTRA_WAIT, GPU_BUSIER),
)
def check(m: Metrics) -> Finding | None:
    sp = spread(m.activity.ranks)
    if sp is None:
        return None
    if sp.by == "data":
        return _data_only(sp, unmeasured_reason(m.activity.ranks))
    if sp.lost_share < LOST.value or sp.lost_per_step_s < MIN_LOST.value:
        return None
    slow = sp.slow
    cause, differs, where = _cause(m, sp)
    primary = next((r for r in m.activity.ranks if r.primary), None)
    pace = f"{slow.steps_per_s:.1f} it/s" if slow.steps_per_s else "its pace"
    n = len(sp.others)
    evidence = (
        _table(sp),
        f"{_others(n)} {ms(sp.lost_per_step_s)} per step for "
        f"rank {slow.rank} in collectives ({sp.lost_share:.0%} of every step): the whole job "
        f"runs at rank {slow.rank}'s pace ({pace})",
        *differs,
        _how_measured(m.activity.ranks),
    )
    return Finding(
        id="straggler-rank",
        severity="warning",
        title=f"Rank {slow.rank} is the straggler: the other ranks wait "
        f"{ms(sp.lost_per_step_s)} per step for it ({_cause_words(cause)})",
        evidence=evidence,
        fix=_FIX[cause],
        where=where,
        wants=_wants(m.ledger, sp, cause, primary),
    )


def _data_only(sp: Spread, why: str) -> Finding | None:
    """No collective timings: a rank that waits longer for data is the only visible cause."""
    slow, step = sp.slow, sp.slow.p50_s
    if step <= 0 or sp.lost_per_step_s / step < EXTRA_WAIT.value:
        return None
    frac = min(1.0, sp.lost_per_step_s / step)
    return Finding(
        id="straggler-rank",
        severity="warning",
        title=f"Rank {slow.rank} waits for data {ms(sp.lost_per_step_s)} per step longer "
        "than the others",
        evidence=(
            f"data wait per step: rank {slow.rank} {ms(slow.wait_per_step_s)}, the median rank "
            f"{ms(sp.median_wait_s)} (step p50 {ms(step)})",
            "in synchronous data-parallel training every rank waits for the slowest at each "
            "gradient all-reduce",
            f"time in collectives was not measured in this run: {why}",
        ),
        fix=_FIX["data"],
        # Every rank runs at the straggler's pace: that share of each step is lost.
        wants=tuple((b, frac) for b in STEP_BUCKETS + ("data_wait",)),
    )


def _cause(m: Metrics, sp: Spread) -> tuple[str, tuple[str, ...], str | None]:
    """What differs about the slow rank: (cause, evidence, where in the user's code)."""
    slow, others, lost = sp.slow, sp.others, sp.lost_per_step_s
    med_wait = _median([r.wait_per_step_s for r in others])
    extra_wait = slow.wait_per_step_s - med_wait
    if extra_wait >= 0.5 * lost:
        return (
            "data",
            (
                f"it waits for data {ms(slow.wait_per_step_s)} per step, the median other rank "
                f"{ms(med_wait)}: its input pipeline (or its shard of the data) is slower",
            ),
            _loader_where(m, slow),
        )
    sizes = [r.samples_per_step for r in others if r.samples_per_step]
    if slow.samples_per_step and sizes and slow.samples_per_step > 1.1 * _median(sizes):
        return (
            "shard",
            (
                f"it trains on {slow.samples_per_step:.0f} samples per step, the median other "
                f"rank on {_median(sizes):.0f}: an uneven split of the data",
            ),
            None,
        )
    save_per_step = slow.save_s / slow.steady_steps if slow.steady_steps else 0.0
    others_save = _median([r.save_s / r.steady_steps if r.steady_steps else 0.0 for r in others])
    if save_per_step - others_save >= 0.3 * lost:
        return (
            "checkpoint",
            (
                f"it spends {ms(save_per_step)} per step in torch.save, the median other rank "
                f"{ms(others_save)}",
            ),
            None,
        )
    gpus = [r.gpu_util for r in others if r.gpu_util is not None]
    if slow.gpu_util is not None and gpus and slow.gpu_util - _median(gpus) >= GPU_BUSIER.value:
        return (
            "gpu",
            (
                f"its GPU is busy {slow.gpu_util:.0f}% of the time, the median other rank's "
                f"{_median(gpus):.0f}%: the same work takes its GPU longer (throttled or slower)",
            ),
            None,
        )
    cpu = _cpu_line(sp)
    if slow.primary and slow.sampled and m.ledger is not None:
        return _own_loop(m, m.ledger, sp, cpu)
    if slow.profile is not None and slow.sampled:
        return _own_stacks(sp, slow.profile, cpu)
    why = (
        "its Python stacks were not sampled (trainprof samples the ranks on the node it runs "
        "on; run it on every node, then `trainprof report` their runs together)"
    )
    return ("unknown", tuple(x for x in (cpu, why) if x), None)


def _own_loop(
    m: Metrics, led: Ledger, sp: Spread, cpu: str | None
) -> tuple[str, tuple[str, ...], str | None]:
    """The slow rank is the one whose stacks were sampled: its own ledger names the work."""
    loop, logging = led.get(*CAUSE_BUCKETS["cpu"]), led.get("logging")
    cause = "logging" if logging > loop else "cpu"
    lost_s = sp.lost_share * led.window_s
    if max(loop, logging) < 0.5 * lost_s:  # its own ledger holds no such extra work
        biggest = sorted(led.seconds.items(), key=lambda kv: -kv[1])[:3]
        parts = ", ".join(f"{b} {led.share(b):.0%}" for b, _s in biggest)
        return "unknown", tuple(x for x in (f"its own steps: {parts}", cpu) if x), None
    where, hottest = _hottest(m.activity.loop_profile, cause)
    share = led.share(*CAUSE_BUCKETS[cause])
    evidence = [f"its own steps: {_WHAT[cause]} {share:.0%} of its time{hottest}"]
    stalls = [st for st in m.activity.stalls if st.cause == "cpu"]
    if stalls:
        evidence.append(f"and {plural(len(stalls), 'stalled step')} of CPU work in its loop")
    if cpu:
        evidence.append(cpu)
    return cause, tuple(evidence), where


# Stack categories (analysis/attribution.py) of host work in a loop, and of printing.
_HOST_WORK = ("other", "sync")
_WHAT = {"logging": "printing and logging", "cpu": "host work outside forward/backward"}


def _own_stacks(
    sp: Spread, prof: Profile, cpu: str | None
) -> tuple[str, tuple[str, ...], str | None]:
    """The slow rank is not the primary, but its own stacks were sampled: the share of its main
    thread's steady time in host work outside forward/backward (or in printing) names the
    cause when it covers what the others lose; its hottest line is where."""
    slow = sp.slow
    loop = sum(prof.share(c) for c in _HOST_WORK)
    logging = prof.share("logging")
    cause = "logging" if logging > loop else "cpu"
    share = max(loop, logging)
    if share * slow.step_s < 0.5 * sp.lost_per_step_s:  # its stacks hold no such extra work
        biggest = sorted(prof.seconds, key=lambda c: -prof.seconds[c])[:3]
        parts = ", ".join(f"{c} {prof.share(c):.0%}" for c in biggest)
        return "unknown", tuple(x for x in (f"its own stacks: {parts}", cpu) if x), None
    where, hottest = _hottest(prof, cause)
    cats = ("logging",) if cause == "logging" else _HOST_WORK
    theirs = {
        r.rank: sum(r.profile.share(c) for c in cats) for r in sp.others if r.profile and r.sampled
    }
    line = f"its own stacks: {_WHAT[cause]} {share:.0%} of its main thread's time"
    if len(theirs) == 1:
        [(other, its)] = theirs.items()
        line += f" (rank {other}: {its:.0%})"
    elif theirs:
        line += f" (the median other sampled rank: {_median(list(theirs.values())):.0%})"
    return cause, tuple(x for x in (line + hottest, cpu) if x), where


def _hottest(prof: Profile | None, cause: str) -> tuple[str | None, str]:
    """The cause's hottest user line in a stack profile: its ``where``, and the words that cite
    it (", hottest in f() at file:line"); nothing when the stacks name no user line."""
    top = prof.top_line("logging" if cause == "logging" else "other") if prof else None
    if top is None:
        return None, ""
    func, path, line = top
    return (
        f"{path}:{line} ({enclosing(func)})",
        f", hottest in {enclosing(func)}() at {path}:{line}",
    )


def _cpu_line(sp: Spread) -> str | None:
    cpus = [r.cpu_percent for r in sp.others if r.cpu_percent is not None]
    if sp.slow.cpu_percent is None or not cpus:
        return None
    return (
        f"CPU: rank {sp.slow.rank} {sp.slow.cpu_percent:.0f}% of a core, the median other rank "
        f"{_median(cpus):.0f}%"
    )


def _loader_where(m: Metrics, slow: RankView) -> str | None:
    if not slow.primary or not m.loaders:
        return None
    return m.loaders[0].code_at("getitem")


def _table(sp: Spread) -> str:
    """The per-rank numbers that show it, compact at any number of ranks."""
    slow = sp.slow
    ranked = sorted(sp.others, key=lambda r: r.collective_per_step_s or 0.0)
    mid = ranked[(len(ranked) - 1) // 2]
    return (
        f"per step: rank {slow.rank} works {ms(slow.busy_s or 0.0)} and waits "
        f"{ms(slow.collective_per_step_s or 0.0)} in collectives; the median other rank "
        f"(rank {mid.rank}) works {ms(mid.busy_s or 0.0)} and waits "
        f"{ms(mid.collective_per_step_s or 0.0)}"
    )


def _how_measured(ranks: tuple[RankView, ...]) -> str:
    ddp = any((r.ddp_per_step_s or 0.0) > 0 for r in ranks)
    where = "at the end of DDP's backward() (the gradient all-reduce)" if ddp else ""
    calls = any((r.collective_per_step_s or 0.0) > (r.ddp_per_step_s or 0.0) for r in ranks)
    if calls:
        where = (where + " and " if where else "") + "in torch.distributed calls"
    return f"collective waits measured inside each of the {len(ranks)} ranks, {where}"


def _cause_words(cause: str) -> str:
    return {
        "data": "its data loading is slower",
        "shard": "it has a bigger shard",
        "checkpoint": "it checkpoints",
        "logging": "it logs",
        "cpu": "extra CPU work in its loop",
        "gpu": "its GPU is slower",
        "unknown": "it does more work per step",
    }[cause]


_FIX: dict[str, tuple[str, ...]] = {
    "cpu": (
        "compute metrics on the device, as tensors, on every rank, and all_reduce them every N "
        "steps (torch.bincount, torchmetrics) instead of in Python on one rank",
        "or run that rank's extra work every N steps, not every step",
    ),
    "logging": (
        "log every N steps, not every step; format and print outside the training loop",
        "or log from every rank at the same (rare) steps, so no rank waits for one",
    ),
    "checkpoint": (
        "checkpoint every N steps or per epoch, and asynchronously "
        "(torch.distributed.checkpoint.async_save) so the other ranks do not wait for it",
    ),
    "data": (
        "give that rank's DataLoader more workers (num_workers, persistent_workers=True) or "
        "check its node (disk, CPU quota, noisy neighbours)",
        "balance the data: DistributedSampler(dataset, drop_last=True) gives every rank an "
        "equal shard",
    ),
    "shard": (
        "split the data evenly: DistributedSampler(dataset, drop_last=True), the same "
        "batch_size on every rank",
    ),
    "gpu": (
        "check that GPU's clocks and throttle reasons: nvidia-smi -q -d PERFORMANCE,CLOCK "
        "(power or thermal limits); trainprof doctor on that node",
        "move the job off that GPU, or give the slower device a smaller share of the batch",
    ),
    "unknown": (
        "compare that rank's node with the others: CPU quota, a throttled GPU "
        "(nvidia-smi -q -d PERFORMANCE), other jobs on it",
        "move work only that rank does (metrics, logging, checkpoints) to every N steps",
    ),
}


def _wants(
    led: Ledger | None, sp: Spread, cause: str, primary: RankView | None
) -> tuple[tuple[str, float], ...]:
    """What the finding claims of the primary rank's steady time.

    The primary rank is the straggler: its cause's buckets in full (that work is what every
    other rank waits for), and the lost share beyond them from its other step buckets. A rule
    about the same buckets (loop-overhead, say) would claim exactly as much; the straggler
    explains more (the other ranks' wait too), so it also claims the all-reduce it takes part
    in (its own collective wait, at most 1 % of the window) and is served first.

    The primary rank waits for another: the lost share, first from where it waits (DDP's
    wait is inside backward), then from its other step buckets."""
    if led is None or led.window_s <= 0 or primary is None:
        return ()
    need = sp.lost_share * led.window_s
    wants: list[tuple[str, float]] = []
    if primary is sp.slow:
        first: tuple[str, ...] = CAUSE_BUCKETS.get(cause, ())
        for b in first:
            if led.seconds.get(b, 0.0) > 0:
                wants.append((b, 1.0))
                need -= led.seconds[b]
        own = min(
            0.01 * led.window_s, (primary.collective_per_step_s or 0.0) * primary.steady_steps
        )
        others = [b for b in STEP_BUCKETS if b not in first and led.seconds.get(b, 0.0) > 0]
        sync = "backward" if "backward" in others else max(others, key=led.get, default=None)
        if need <= 0 and own > 0 and sync is not None:
            wants.append((sync, min(1.0, own / led.seconds[sync])))
    else:
        ddp = (primary.ddp_per_step_s or 0.0) >= 0.5 * (primary.collective_per_step_s or 0.0)
        first = ("backward",) if ddp else ()
        for b in first:
            have = led.seconds.get(b, 0.0)
            if have > 0 and need > 0:
                take = min(have, need)
                wants.append((b, take / have))
                need -= take
    rest = [b for b in STEP_BUCKETS if b not in first]
    pool = sum(led.seconds.get(b, 0.0) for b in rest)
    if need > 0 and pool > 0:
        frac = min(1.0, need / pool)
        wants.extend((b, frac) for b in rest)
    return tuple(wants)


def _median(values: list[float]) -> float:
    s = sorted(values)
    return s[(len(s) - 1) // 2] if s else 0.0


def _others(n: int) -> str:
    return "the other rank waits" if n == 1 else f"the other {n} ranks wait"
