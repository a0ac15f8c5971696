"""Worker start-up: every epoch waits for freshly started DataLoader workers.

With ``persistent_workers=False`` the workers are re-created, and the dataset re-sent to them,
at the start of every epoch; short epochs pay it again and again. A loop that builds a new
DataLoader each epoch (over the same dataset) starts new workers each epoch whatever its
``persistent_workers`` says.

Anti-pattern::

    loader = DataLoader(dataset, num_workers=4)  # workers restart each epoch
    for epoch in range(100):
        for batch in loader: ...

Best practice::

    loader = DataLoader(dataset, num_workers=4, persistent_workers=True)
"""

from __future__ import annotations

from trainprof.analysis import frameworks
from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules._common import ms, primary_loader, site
from trainprof.analysis.rules.registry import Threshold, rule
from trainprof.analysis.stats import median
from trainprof.units import plural

FACTOR = Threshold("factor", 5.0, "ratio", "an epoch's first batch waits this many steady batches")
# Short epochs pay a short start-up often: 83 epochs of 32 batches waited 45 ms each for their
# workers, 41 % of the run, under the 50 ms this was. The share decides; this keeps out noise.
MIN_WAIT = Threshold("min_wait", 0.01, "s", "and at least this long")
PERSISTENT_FIX = "DataLoader(..., persistent_workers=True) keeps workers alive across epochs"
BUILD_ONCE_FIX = (
    "build the DataLoader once, before the epoch loop, with persistent_workers=True, and "
    "iterate that one every epoch: its workers then start once (the sampler still reshuffles "
    "each epoch)"
)
SHARE = Threshold(
    "share",
    0.05,
    "share",
    "all epochs' first waits, as a share of the run, or of the steady run (the time ledger's "
    "share): a job whose start-up (imports, a tokenizer) is most of the run still loses the "
    "steady share to its restarts",
)


@rule(
    id="worker-startup",
    examples=("worker_startup",),
    title="Worker start-up",
    family="input",
    needs=("steps", "loader"),
    claims=("worker_start",),
    thresholds=(FACTOR, MIN_WAIT, SHARE),
    settings=frameworks.settings("persistent_workers"),
)
def check(m: Metrics) -> Finding | None:
    s = m.steady
    loader = primary_loader(m)
    assert s is not None
    if loader is None or not (loader.config.get("num_workers") or 0):
        return None
    firsts = loader.first_batch_waits_s
    rebuilt = loader.built > 1
    if len(firsts) < 2 or loader.workers_persist:
        return None
    wait_frac = m.activity.train_wait_frac
    if wait_frac is None:
        wait_frac = s.data_wait_frac or 0.0
    per_batch = wait_frac * s.duration_s / s.count / max(s.fetches_per_step, 1)
    typical = median(firsts)
    span = m.activity.run_span_s
    cost = sum(firsts)
    if typical < max(MIN_WAIT.value, FACTOR.value * per_batch):
        return None
    led = m.ledger
    steady = led.share("worker_start") if led is not None else 0.0
    if not span or max(cost / span, steady) < SHARE.value:
        return None
    workers = int(loader.config.get("num_workers") or 0)
    cs = site(m, list(loader.first_batch_windows))  # where each pass starts its workers
    return Finding(
        id="worker-startup",
        severity="warning",
        title=f"Every epoch waits {ms(typical)} for its first batch while {plural(workers, 'worker')} restart",
        evidence=(
            f"{plural(len(firsts), 'epoch')}; first-batch wait per epoch: median {ms(typical)}, "
            f"max {ms(max(firsts))} (a steady batch waits {ms(per_batch)})",
            (
                f"a new DataLoader over the same dataset every epoch ({loader.built} built): "
                "each starts its own workers and sends them the dataset"
                if rebuilt
                else "persistent_workers=False: workers are re-created and the dataset re-sent "
                "to them every epoch"
            )
            + f", {_cost(m, cost, span)}",
        ),
        fix=(
            BUILD_ONCE_FIX if rebuilt else PERSISTENT_FIX,
            "make the dataset cheap to pickle (open files and load indexes lazily in "
            "__getitem__ or worker_init_fn, not in __init__)",
        ),
        where=cs.where if cs else None,
    )


def _cost(m: Metrics, cost: float, span: float) -> str:
    """The waits' cost, as a share of the steady run where the time ledger has it (the share
    the finding's header shows), else of the whole run."""
    led = m.ledger
    if led is not None and led.get("worker_start") > 0:
        return (
            f"{led.get('worker_start'):.2f} s of the steady run ({led.share('worker_start'):.0%})"
        )
    return f"{cost:.2f} s in all ({cost / span:.0%} of the run)"
