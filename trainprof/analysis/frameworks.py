"""Which training framework runs the loop, read from the main thread's stacks: a finding's fix
then also names that framework's own setting (``eval_steps``, ``val_check_interval``), since
its users never write the loop the generic fix speaks of. Pure."""

from __future__ import annotations

from collections.abc import Iterable

from trainprof.store.stacks import StackSpan

# Files only the framework's training loop runs (not a mere import of the package).
_LOOP_FILES = {
    "transformers": ("/transformers/trainer.py",),
    "lightning": ("/lightning/pytorch/loops/", "/pytorch_lightning/loops/"),
}
NAMES = {"transformers": "the Hugging Face Trainer", "lightning": "Lightning"}


def detect(spans: Iterable[StackSpan]) -> str | None:
    """The framework whose training loop held the main thread longest, or None (a loop of
    one's own, or no stacks)."""
    which: dict[int, str | None] = {}  # per distinct stack (the loader interns them)
    seconds = dict.fromkeys(_LOOP_FILES, 0.0)
    for s in spans:
        key = id(s.frames)
        if key not in which:
            paths = [f[1].replace("\\", "/") for f in s.frames]
            which[key] = next(
                (
                    n
                    for n, parts in _LOOP_FILES.items()
                    if any(x in p for p in paths for x in parts)
                ),
                None,
            )
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
