"""The probe's one per-process state: the step in progress' counters and what the hooks remember.

Every hook module binds ``state`` by name (``from trainprof.probe.state import state``), so a
hot path reads it as its own module global, one lookup, and never rebinds it: a test that
needs a fresh one resets its fields in place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainprof.probe.device import Timeline
    from trainprof.probe.flops import StepFlops


def _nobody() -> None:
    """A dead weak reference: no optimizer is counted yet."""
    return None


class State:
    """Counters for the step in progress (one set per process)."""

    # Slots: a fixed layout, read by offset (an instance dict of more than 30 keys is not shared
    # and its reads take the slow path); the hooks read a few of these every step.
    __slots__ = (
        "writer",
        "primary_opt_id",
        "primary_ref",
        "primary_entry",
        "last_boundary",
        "steps",
        "batches_seen",
        "epochs_pending",
        "loader_caller_recorded",
        "wait",
        "sampler",
        "fetches",
        "samples",
        "batch_size",
        "max_steps",
        "steps_min_s",
        "first_step_t",
        "optimizer_made",
        "early_steps",
        "backward_seen",
        "loader_keys",
        "loader_count",
        "shuffled_datasets",
        "training",
        "train_depth",
        "fetch_count",
        "fetch_time",
        "collate_time",
        "pin_time",
        "fetch_reported",
        "timeline",
        "pre_step_hooks",
        "pre_step_key",
        "pre_step_in",
        "optimizer_log",
        "optimizers",
        "other_stepped_twice",
        "optimizers_reported",
        "model_ref",
        "made_optimizers",
        "zero_grad_kept",
        "device_off",
        "flops",
    )

    def __init__(self) -> None:
        self.writer: Any = None  # the probe's EventWriter, read once at install
        self.primary_opt_id: int | None = None
        # the counted optimizer's weak reference and [label, steps] entry (its step's fast path)
        self.primary_ref: Any = _nobody
        self.primary_entry: list[Any] = ["", 0]
        self.last_boundary = 0.0
        self.steps = 0
        self.batches_seen = False  # a DataLoader batch came before any optimizer step
        # iterators made by DataLoader.__iter__ whose first batch (its epoch record) is to come
        self.epochs_pending = 0
        self.loader_caller_recorded = False
        self.wait = 0.0
        self.sampler = 0.0
        self.fetches = 0
        self.samples = 0
        self.batch_size = -1
        self.max_steps: int | None = None
        self.steps_min_s = 0.0  # with max_steps: run at least this long after the first step
        self.first_step_t: float | None = None
        # With max_steps: a torch optimizer was built (its steps are the steps; see
        # watches._noticed_optimizer), the DataLoader batches or backward returns counted before
        # any optimizer step (the steps of a job that has none), and a backward pass among batches
        self.optimizer_made = False
        self.early_steps = 0
        self.backward_seen = False
        self.loader_keys: dict[int, int] = {}  # id(loader) -> key, where it takes no attribute
        self.loader_count = 0  # keys given
        # id(dataset) -> the key of the first loader over it: its shuffling passes, whichever
        # loader made them (a new DataLoader, or a new sampler, each epoch)
        self.shuffled_datasets: dict[int, int] = {}
        self.training: bool | None = None
        self.train_depth = 0
        self.fetch_count = 0
        self.fetch_time = 0.0  # dataset fetch: __getitem__ calls + collate, per batch
        self.collate_time = 0.0  # the collate_fn part of fetch_time
        self.pin_time = 0.0  # pin_memory in the main thread (num_workers=0)
        self.fetch_reported = 0
        self.timeline: Timeline | None = None  # CUDA events at step boundaries (GPU jobs)
        # torch's global pre-step hooks once the timeline started, the key the probe's hook
        # takes there, and whether it is in (only around timed steps: see
        # device_marks.sync_pre_step)
        self.pre_step_hooks: dict[int, Any] | None = None
        self.pre_step_key = 0
        self.pre_step_in = False
        # Every optimizer that stepped, in order: [label, steps]; and by id() the live ones, with
        # a weak reference (an optimizer built per phase gets the id of the one it replaced).
        self.optimizer_log: list[list[Any]] = []
        self.optimizers: dict[int, tuple[Any, list[Any]]] = {}
        self.other_stepped_twice: int | None = None  # a non-primary stepped, primary did not since
        self.optimizers_reported = 0
        self.model_ref: Any = None  # weakref to the module last trained at the top level
        self.made_optimizers: list[Any] = []  # weakrefs to the optimizers made before a step
        self.zero_grad_kept = False  # zero_grad(set_to_none=False) was seen
        self.device_off = False  # the "device" probe part is switched off
        self.flops: StepFlops | None = None  # counting one step's FLOPs (CUDA jobs, once)


state = State()


def weak(obj: Any) -> Any:
    """A weak reference to ``obj``, or a callable that holds it where it cannot have one."""
    import weakref

    try:
        return weakref.ref(obj)
    except TypeError:  # an optimizer that cannot be weakly referenced: compare by value
        return lambda: obj
