"""The rule registry: a rule is one module that declares its id, severity, the signals it
needs, its thresholds, the ledger buckets it claims, and its check. Declarations are validated
at import, so a typo in a signal or a bucket fails loudly instead of silently skipping a rule.

A crash signature is a rule found in the job's output rather than in its measurements: its
module declares, with ``@signature``, the text it matches (cheap literal needles, then patterns)
and the builder that turns the lines it matched into a finding.

``trainprof rules`` and the README's rules table are generated from this registry; a rule
module's docstring holds its **Anti-pattern** and **Best practice** blocks.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from trainprof.analysis import frameworks, ledger
from trainprof.analysis.crash.row import Build, Signature
from trainprof.analysis.findings import Finding, Harm, Severity
from trainprof.analysis.metrics import ENOUGH_STEPS, MIN_ENOUGH_S, MIN_STEADY_S, Metrics
from trainprof.units import plural, plural_of

Family = Literal[
    "input", "stalls", "host", "model", "memory", "gpu", "distributed", "crash", "hang"
]


def _steps(m: Metrics) -> str | None:
    s = m.steady
    if s is None:
        return f"too few {plural_of(m.unit)} to judge a steady state ({m.total_steps} seen)"
    if s.duration_s >= MIN_STEADY_S or (s.count >= ENOUGH_STEPS and s.duration_s >= MIN_ENOUGH_S):
        return None
    return (
        f"the steady state is too short to judge ({plural(s.count, m.unit)} in "
        f"{s.duration_s * 1e3:.0f} ms; rules need {ENOUGH_STEPS} over {MIN_ENOUGH_S:g} s, "
        f"or {MIN_STEADY_S:g} s)"
    )


def _loader(m: Metrics) -> str | None:
    return None if m.loaders else "no torch DataLoader was iterated"


def _stacks(m: Metrics) -> str | None:
    if m.activity.profile is None:
        return f"no stack samples: {m.activity.stacks_error or 'py-spy did not run'}"
    if m.outside is not None and m.outside.sampled_s < MIN_STEADY_S:
        # as a steady state is not judged shorter: a job that exited 0.25 s into an attach
        # was called input-bound from its 50 stack samples
        return (
            f"too little was sampled to judge ({m.outside.sampled_s * 1e3:.0f} ms of stacks; "
            f"rules need {MIN_STEADY_S:g} s)"
        )
    return None


def _sampled_window(m: Metrics) -> str | None:
    if not m.basis.by_stacks:
        return "the window's time was split by the probe's timed steps, not by stack samples"
    return None


def _samples(m: Metrics) -> str | None:
    if m.peak_rss_bytes is None and m.activity.swap_total is None:
        return "no host samples"
    return None


def _cuda(m: Metrics) -> str | None:
    return None if m.on_cuda else "the model does not train on a CUDA device"


def _ranks(m: Metrics) -> str | None:
    return None if len(m.activity.ranks) >= 2 else "not a multi-rank (torchrun) job"


def _gpu(m: Metrics) -> str | None:
    if m.gpu_util_mean is not None:
        return None
    return f"GPU not measured: {m.gpu_unavailable or 'no GPU samples'}"


def _machine_gpus(m: Metrics) -> str | None:
    if m.machine_gpus:
        return None
    why = m.gpu_unavailable or "no GPU samples"
    return f"no NVIDIA GPU seen on this machine ({why})"


def _flops(m: Metrics) -> str | None:
    u = m.mfu
    if u is not None:
        return None if u.peak_tflops else f"no dense peak known for {u.gpu_name} in {u.precision}"
    skipped = (m.activity.flops or {}).get("skipped")
    return f"no FLOP count: {skipped or 'no step was counted'}"


def _gpu_memory(m: Metrics) -> str | None:
    total = (m.activity.precision or {}).get("memory_total")
    if m.device is None or m.device.peak_reserved is None or not total:
        return "CUDA memory not read (no timed steps)"
    return None


def _model(m: Metrics) -> str | None:
    if m.activity.unoptimized is not None:
        return None
    return (
        "no model was found at the first optimizer step (none had train() called on it or was "
        "held by the frames that stepped the optimizer)"
    )


def _schedstat(m: Metrics) -> str | None:
    if m.cpu_starvation is not None:
        return None
    return (
        "the main thread's wait for a CPU was not read (no /proc schedstat, or a steady state "
        "shorter than two host samples)"
    )


def _compiles(m: Metrics) -> str | None:
    if m.activity.compiles is not None:
        return None
    return "the job did not compile with torch.compile (no compile was timed)"


def _debug(m: Metrics) -> str | None:
    if m.activity.debug is not None:
        return None
    return "torch's debug switches were not read (the probe reads them at the first optimizer step)"


def _stderr(_m: Metrics) -> str | None:
    return None  # the job's output is always kept


# Signal → why it is missing in this run (None: present).
SIGNALS: dict[str, Callable[[Metrics], str | None]] = {
    "steps": _steps,
    "loader": _loader,
    "stacks": _stacks,
    "samples": _samples,
    "cuda": _cuda,
    "ranks": _ranks,
    "gpu": _gpu,
    "machine_gpus": _machine_gpus,
    "flops": _flops,
    "gpu_memory": _gpu_memory,
    "stderr": _stderr,
    "model": _model,
    "schedstat": _schedstat,
    "compiles": _compiles,
    "debug": _debug,
    "sampled_window": _sampled_window,
}

# What a signal is, where no probe measured the job (`trainprof attach`, or a probe that did
# not load): the most specific first, as a rule is skipped with the first it needs.
PROBE_SIGNALS = {
    "cuda": "the model's device, precision and layers come from the probe: needs `trainprof run`",
    "model": "the model's parameters and optimizers come from the probe: needs `trainprof run`",
    "ranks": "per-rank step times need `trainprof run`",
    "loader": "the DataLoader's settings and per-batch counts need `trainprof run`",
    "stderr": "attach does not see the job's output",
    "compiles": "torch.compile's compiles are timed by the probe: needs `trainprof run`",
    "debug": "torch's debug switches are read by the probe: needs `trainprof run`",
    "steps": "per-step timing (step times, data wait per step) needs `trainprof run`",
}
# The signals a rule judges from stack samples alone, where no probe timed the steps.
FROM_STACKS = ("stacks", "sampled_window")


@dataclass(frozen=True)
class Threshold:
    """A named number a rule compares against, with what it means (shown in the rules table)."""

    name: str
    value: float
    unit: str  # "share" (0..1, shown as %), "%" (0..100), "s", "bytes", "bytes/s", "count", "ratio"
    doc: str

    def __str__(self) -> str:
        v = self.value
        if self.unit == "share":
            return f"{v:.0%}"
        if self.unit == "bytes/s":
            return f"{v * 60 / 2**20:.0f} MiB/min" if v < 2**20 else f"{v / 2**20:.0f} MiB/s"
        if self.unit == "bytes":
            return f"{v / 2**20:.0f} MiB"
        if self.unit == "s":
            return f"{v * 1e3:.0f} ms" if v < 1 else f"{v:g} s"
        if self.unit == "%":
            return f"{v:g}%"
        if self.unit == "ratio":
            return f"{v:g}×"
        return f"{v:g}"


Check = Callable[[Metrics], Finding | None]

# The run's facts a fix may need: a model trained on an accelerator; layers that act
# differently in train() and eval() (dropout, batch norm).
Device = Literal["any", "accelerator"]
Modules = Literal["any", "dropout or batch norm"]
# What a fix changes: the job's code, a setting it can change without editing code, or what is
# trained (the batch, the number of updates, what the loss depends on).
Changes = Literal["code", "setting", "training"]


@dataclass(frozen=True)
class Effect:
    """A fix's expected effect from this run's numbers; ``helps`` False holds the fix back."""

    text: str  # "up to +19 % samples/s (the loop waits for data 33 % ...)", or why not
    helps: bool = True
    predicted: bool = True  # False: ``text`` says why this run cannot predict it


# (the run, the finding, the fix line) → its effect; None: not predicted
Predict = Callable[[Metrics, Finding, str], Effect | None]


@dataclass(frozen=True)
class Fix:
    """One kind of fix line: the lines it is, what must hold for the job, and what it changes.

    ``match`` is searched in each fix line (the first fix that matches is the line's, a rule's
    own before the shared ones); ``unless`` excludes lines it also matches. ``clause``: where
    the fix cannot hold, the matched words are cut from the line instead of the whole line.
    ``says`` is what the line must tell the user (a batch's effect on the updates, a pin's
    risk), added where the line does not. ``loss_free``: only for work the loss does not
    depend on (running it every N steps or on another thread). ``predict`` gives its effect
    from this run's numbers; None: not predicted.
    """

    name: str
    match: str
    device: Device
    modules: Modules
    changes: Changes
    says: str = ""
    loss_free: bool = False
    unless: str = ""
    clause: bool = False
    needs_workers: bool = False  # only for a loader that has workers, or is told to start them
    predict: Predict | None = None

    def is_line(self, line: str) -> bool:
        if not re.search(self.match, line):
            return False
        return not (self.unless and re.search(self.unless, line))


@dataclass(frozen=True)
class Rule:
    id: str
    title: str
    family: Family
    severity: Severity  # the usual severity; a check may raise it (memory that runs out)
    needs: tuple[str, ...]
    claims: tuple[str, ...]  # ledger buckets its findings may claim
    thresholds: tuple[Threshold, ...]
    check: Check | None  # None: found by another mechanism (crash signatures, the hang watch)
    doc: str  # the rule module's docstring
    # framework (analysis/frameworks.py) → its own setting for the fix, added to a finding of
    # a job that framework runs
    settings: Mapping[str, str] = field(default_factory=dict)
    # the signals its check judges from where ``needs`` are missing (stack samples alone)
    or_from: tuple[str, ...] = ()
    # "host": its cost is host time in the steady loop, which a busy GPU hides (on a GPU job
    # such findings together cost at most the GPU's idle share); "run": time the run loses
    costs: Literal["run", "host"] = "run"
    last_resort: bool = False  # dropped when any specific cause (a warning or error) was found
    per_rank: bool = True  # judged on each rank's own steps too (not: a finding about the job)
    harm: Harm = "time"  # what its cause harms; "results" and "debug" rank before "time"
    # the zoo scripts (trainprof/examples/zoo/) that reproduce it, its shipped example first
    examples: tuple[str, ...] = ()
    # another rule's id → how their causes compound: where both are found, each finding says so
    # (a pair is declared by one of its two rules)
    compounds: Mapping[str, str] = field(default_factory=dict)
    # the fixes its lines may be, matched before the shared ones (rules/_fixes.py)
    fixes: tuple[Fix, ...] = ()

    @property
    def summary(self) -> str:
        """The docstring's first paragraph, on one line."""
        first = self.doc.strip().split("\n\n", 1)[0]
        return " ".join(first.split()) or self.title

    def block(self, heading: str) -> str:
        """The code block under a docstring heading (``Anti-pattern``, ``Best practice``)."""
        lines = self.doc.splitlines()
        for i, line in enumerate(lines):
            if line.strip().rstrip(":") == heading:
                body = []
                for nxt in lines[i + 1 :]:
                    if nxt.strip() and not nxt.startswith("    "):
                        break
                    body.append(nxt[4:] if nxt.startswith("    ") else "")
                return "\n".join(body).strip("\n")
        return ""


REGISTRY: dict[str, Rule] = {}


class RuleError(Exception):
    """A rule declaration that cannot be right (raised at import)."""


def rule(
    *,
    id: str,
    title: str,
    family: Family,
    severity: Severity = "warning",
    needs: tuple[str, ...] = (),
    claims: tuple[str, ...] = (),
    thresholds: tuple[Threshold, ...] = (),
    settings: Mapping[str, str] | None = None,
    or_from: tuple[str, ...] = (),
    costs: Literal["run", "host"] = "run",
    last_resort: bool = False,
    per_rank: bool = True,
    harm: Harm = "time",
    examples: tuple[str, ...] = (),
    compounds: Mapping[str, str] | None = None,
    fixes: tuple[Fix, ...] = (),
) -> Callable[[Check], Check]:
    """Register the decorated check as rule ``id`` (its module's docstring is its reference)."""
    declared = dict(
        id=id,
        title=title,
        family=family,
        severity=severity,
        needs=needs,
        claims=claims,
        thresholds=thresholds,
        settings=settings or {},
        or_from=or_from,
        costs=costs,
        last_resort=last_resort,
        per_rank=per_rank,
        harm=harm,
        examples=examples,
        compounds=compounds or {},
        fixes=fixes,
    )

    def register(check: Check) -> Check:
        doc = sys.modules[check.__module__].__doc__ or ""
        define(**declared, check=check, doc=doc)  # type: ignore[arg-type]
        return check

    return register


SIGNATURES: dict[str, Signature] = {}


def signature(
    *,
    id: str,
    title: str,
    order: int,
    needles: tuple[str, ...],
    patterns: tuple[re.Pattern[str], ...],
    examples: tuple[str, ...] = (),
) -> Callable[[Build], Build]:
    """Register the decorated builder as crash signature ``id`` (its module's docstring is its
    reference). Signatures are tried by ``order``, lowest first: the most specific first, as a
    line one used is not offered to those after it, and a builder sees their findings."""

    def register(build: Build) -> Build:
        taken = [s.id for s in SIGNATURES.values() if s.order == order]
        if taken:
            raise RuleError(f"crash signature {id}: order {order} is {taken[0]}'s already")
        if not needles or not patterns:
            raise RuleError(f"crash signature {id}: it needs needles and patterns")
        doc = sys.modules[build.__module__].__doc__ or ""
        define(
            id=id,
            title=title,
            family="crash",
            severity="error",
            needs=("stderr",),
            claims=(),
            thresholds=(),
            check=None,
            doc=doc,
            per_rank=False,
            examples=examples,
        )
        SIGNATURES[id] = Signature(id, order, needles, patterns, build)
        return build

    return register


def define(
    *,
    id: str,
    title: str,
    family: Family,
    severity: Severity,
    needs: tuple[str, ...],
    claims: tuple[str, ...],
    thresholds: tuple[Threshold, ...],
    check: Check | None,
    doc: str,
    settings: Mapping[str, str] | None = None,
    or_from: tuple[str, ...] = (),
    costs: Literal["run", "host"] = "run",
    last_resort: bool = False,
    per_rank: bool = True,
    harm: Harm = "time",
    examples: tuple[str, ...] = (),
    compounds: Mapping[str, str] | None = None,
    fixes: tuple[Fix, ...] = (),
) -> Rule:
    unknown = [n for n in (*needs, *or_from) if n not in SIGNALS]
    if unknown:
        raise RuleError(f"rule {id}: unknown signal(s) {unknown}; known: {sorted(SIGNALS)}")
    bad = [c for c in claims if c not in ledger.BUCKETS]
    if bad:
        raise RuleError(f"rule {id}: unknown ledger bucket(s) {bad}; known: {ledger.BUCKETS}")
    if id in REGISTRY:
        raise RuleError(f"rule {id} is defined twice")
    for fx in fixes:
        try:
            re.compile(fx.match)
            re.compile(fx.unless)
        except re.error as e:
            raise RuleError(f"rule {id}: fix {fx.name!r} has a bad pattern: {e}") from e
    if id in (compounds or {}):
        raise RuleError(f"rule {id}: it cannot compound itself")
    shared = [(n, r.id) for r in REGISTRY.values() for n in examples if n in r.examples]
    if shared:
        raise RuleError(f"rule {id}: zoo script {shared[0][0]} is {shared[0][1]}'s example")
    for heading in ("Anti-pattern", "Best practice"):
        if heading not in doc:
            raise RuleError(f"rule {id}: its docstring needs an '{heading}:' block")
    unknown_fw = [f for f in settings or {} if f not in frameworks.NAMES]
    if unknown_fw:
        raise RuleError(f"rule {id}: unknown framework(s) {unknown_fw}")
    r = Rule(
        id,
        title,
        family,
        severity,
        needs,
        claims,
        thresholds,
        check,
        doc,
        settings or {},
        or_from,
        costs,
        last_resort,
        per_rank,
        harm,
        examples,
        compounds or {},
        fixes,
    )
    REGISTRY[id] = r
    return r


def compounding(rules: Mapping[str, Rule]) -> dict[frozenset[str], str]:
    """Each declared pair of rule ids whose causes compound → how; a pair declared twice, or
    naming an unknown rule, raises RuleError (checked once every rule is registered)."""
    pairs: dict[frozenset[str], str] = {}
    for r in rules.values():
        for other, how in r.compounds.items():
            if other not in rules:
                raise RuleError(f"rule {r.id}: compounds an unknown rule {other!r}")
            pair = frozenset((r.id, other))
            if pair in pairs:
                raise RuleError(f"rules {r.id} and {other}: their pair is declared twice")
            pairs[pair] = how
    return pairs


def missing_signal(r: Rule, m: Metrics) -> str | None:
    """Why rule ``r`` cannot judge ``m`` (None: it can), from the first signal it lacks: its
    ``needs``, or else its ``or_from`` signals where it can judge from those."""
    reason = _first_missing(r.needs, m)
    if reason is None or not r.or_from:
        return reason
    other = _first_missing(r.or_from, m)
    if other is None:
        return None
    # judged from stack samples alone, what they lack is the reason, not the probe's absence
    return other if m.basis.by_stacks else reason


def _first_missing(needs: tuple[str, ...], m: Metrics) -> str | None:
    probe = [n for n in PROBE_SIGNALS if n in needs]
    if probe and m.probe_missing is not None:
        # Not "too few steps (0 seen)": the steps were made, nothing was there to see them.
        return "the probe did not load in the job: nothing it measures was seen"
    if probe and m.basis.by_stacks:  # no probe timed the steps: what it measures is missing
        return PROBE_SIGNALS[probe[0]]
    for need in needs:
        reason = SIGNALS[need](m)
        if reason is not None:
            return reason
    return None
