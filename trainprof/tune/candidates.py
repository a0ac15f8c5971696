"""The settings `tune` tries: training DataLoader workers, torch threads, and both within the CPUs.

Each candidate changes what the job runs with, never what it trains: the batch size, precision
and anything else that changes the results are listed as not tried.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAX_CANDIDATES = 8
# What tune leaves alone, and why: each changes what is trained.
NOT_TRIED = (
    ("batch_size", "changes results: not tried (fewer optimizer updates, another learning rate)"),
    ("precision (autocast, bf16)", "changes results: not tried (other numerics)"),
)


@dataclass(frozen=True)
class JobSettings:
    """The job's own settings as its training loader started: workers, their persistence, threads."""

    num_workers: int | None  # None: no training DataLoader (only threads can be tried)
    persistent_workers: bool
    threads: int


@dataclass(frozen=True)
class Candidate:
    """One set of settings to try, as the probe's override takes it."""

    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The settings as a user reads them; the baseline is "the job's own settings"."""
        if not self.settings:
            return "the job's own settings"
        parts = [f"{k}={v}" for k, v in self.settings.items() if k != "threads"]
        if "threads" in self.settings:
            parts.append(f"threads={self.settings['threads']}")
        return ", ".join(parts)

    def code(self) -> list[str]:
        """The copy-paste lines that make the job run with these settings."""
        lines = []
        loader = [f"{k}={v}" for k, v in self.settings.items() if k != "threads"]
        if loader:
            lines.append(f"DataLoader(..., {', '.join(loader)})")
        if "threads" in self.settings:
            lines.append(f"torch.set_num_threads({self.settings['threads']})")
        return lines


BASELINE = Candidate()


def _steps(upto: int) -> list[int]:
    """0, 1, 2, 4, 8, ... and ``upto`` itself: a few counts, spread over 0..upto."""
    out, n = [0, 1], 2
    while n < upto:
        out.append(n)
        n *= 2
    return sorted({x for x in [*out, upto] if x <= upto})


def candidates(job: JobSettings, usable_cpus: int) -> list[Candidate]:
    """Workers 0..CPUs (persistent where more than 0), threads 1..CPUs, and workers plus threads
    that fill the CPUs together; none equal to the job's own, at most ``MAX_CANDIDATES``."""
    cpus = max(1, usable_cpus)
    if job.num_workers is None:
        return [Candidate({"threads": t}) for t in _steps(cpus)[1:] if t != job.threads][
            :MAX_CANDIDATES
        ]
    out: list[dict[str, Any]] = []
    for w in _steps(cpus):
        if w != job.num_workers:
            out.append({"num_workers": w, "persistent_workers": True} if w else {"num_workers": 0})
    if job.num_workers > 0 and not job.persistent_workers:
        out.append({"num_workers": job.num_workers, "persistent_workers": True})
    for t in _steps(cpus)[1:]:
        if t != job.threads:
            out.append({"threads": t})
    for w in _steps(cpus)[1:]:
        t = cpus - w
        if t >= 1 and w != job.num_workers and t != job.threads:
            out.append({"num_workers": w, "persistent_workers": True, "threads": t})
    unique: list[Candidate] = []
    for settings in out:
        c = Candidate(settings)
        if c not in unique:
            unique.append(c)
    return unique[:MAX_CANDIDATES]


def parse_candidate(text: str) -> Candidate:
    """``num_workers=2,persistent_workers=True,threads=1`` as a candidate; a one-line error
    for anything else."""
    from trainprof.errors import TrainprofError

    settings: dict[str, Any] = {}
    for part in (p.strip() for p in text.split(",")):
        key, _, value = part.partition("=")
        key = key.strip()
        if key in ("num_workers", "prefetch_factor", "threads"):
            low = 1 if key == "threads" else 0
            if not value.strip().isdigit() or int(value) < low:
                raise TrainprofError(f"--candidate {text}: {key} takes a whole number ≥ {low}")
            settings[key] = int(value)
        elif key in ("persistent_workers", "pin_memory"):
            if value.strip() not in ("True", "False", "true", "false"):
                raise TrainprofError(f"--candidate {text}: {key} takes True or False")
            settings[key] = value.strip() in ("True", "true")
        else:
            raise TrainprofError(
                f"--candidate {text}: {key or part!r} is not a setting tune changes "
                "(num_workers, persistent_workers, pin_memory, prefetch_factor, threads)"
            )
    return Candidate(settings)
