"""Which training framework runs the loop, read from the main thread's stacks (or, without
them, from the stack the probe read at the first optimizer step): a finding's fix then also
names that framework's own setting (``eval_steps``, ``val_check_interval``), since its users
never write the loop the generic fix speaks of. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from trainprof.store.stacks import StackSpan

# Files only the framework's training loop runs (not a mere import of the package).
_LOOP_FILES = {
    "transformers": ("/transformers/trainer.py",),
    "lightning": ("/lightning/pytorch/loops/", "/pytorch_lightning/loops/"),
}
NAMES = {"transformers": "the Hugging Face Trainer", "lightning": "Lightning"}


def _of_path(path: str) -> str | None:
    p = path.replace("\\", "/")
    return next((n for n, parts in _LOOP_FILES.items() if any(x in p for x in parts)), None)


def detect(spans: Iterable[StackSpan], infos: Iterable[dict[str, Any]] = ()) -> str | None:
    """The framework whose training loop held the main thread longest; with no stacks (``run
    --no-stacks``), the one that called the first optimizer step (the probe's
    ``step_callers``); None for a loop of one's own."""
    return _from_stacks(spans) or _from_step_callers(infos)


def _from_step_callers(infos: Iterable[dict[str, Any]]) -> str | None:
    for info in infos:
        callers = info.get("step_callers")
        if isinstance(callers, list):
            files = (
                f[1]
                for f in callers
                if isinstance(f, list) and len(f) == 2 and isinstance(f[1], str)
            )
            return next((n for n in map(_of_path, files) if n is not None), None)
    return None


def _from_stacks(spans: Iterable[StackSpan]) -> str | None:
    which: dict[int, str | None] = {}  # per distinct stack (the loader interns them)
    seconds = dict.fromkeys(_LOOP_FILES, 0.0)
    for s in spans:
        key = id(s.frames)
        if key not in which:
            which[key] = next((n for n in (_of_path(f[1]) for f in s.frames) if n), None)
        name = which[key]
        if name is not None:
            seconds[name] += s.t1 - s.t0
    best = max(seconds, key=lambda n: seconds[n])
    return best if seconds[best] > 0 else None


def setting_fix(framework: str | None, settings: dict[str, str]) -> tuple[str, ...]:
    """The framework's own setting for a fix, as one more fix line (or none)."""
    if framework is None or framework not in settings:
        return ()
    return (f"with {NAMES[framework]}: {settings[framework]}",)
