"""Which training framework runs the loop, and its own words for each knob a fix turns.

A finding's fix then also names that framework's setting (``eval_steps``,
``val_check_interval``, ``eval_iters``, ``--workers``), since its users never write the loop the
generic fix speaks of. The Hugging Face Trainer and Lightning are told by their training loop
(the main thread's stacks, or the stack that stepped the optimizer); a script (nanoGPT's
``train.py``, timm's, a pytorch/examples one) by what its source defines: its config
variables, its command-line flags. Pure but for reading that script's source, as the stacks'
lines are read.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Mapping
from typing import Any

from trainprof.analysis.usercode import is_user_path
from trainprof.store.stacks import StackSpan

NAMES = {
    "transformers": "the Hugging Face Trainer",
    "lightning": "Lightning",
    "nanogpt": "nanoGPT",
    "timm": "timm's train.py",
    "examples": "a pytorch/examples-style script",
}

# Files only the framework's training loop runs (not a mere import of the package).
_LOOP_FILES = {
    "transformers": ("/transformers/trainer.py",),
    "lightning": ("/lightning/pytorch/loops/", "/pytorch_lightning/loops/"),
}

# The knobs a fix turns: what each means, in PyTorch's words.
KNOBS = {
    "eval_every": "evaluate less often",
    "eval_size": "evaluate on fewer batches",
    "eval_batch": "a larger evaluation batch",
    "eval_workers": "the validation loader's workers",
    "save_every": "save checkpoints less often, or smaller",
    "log_every": "log less often",
    "workers": "DataLoader num_workers",
    "persistent_workers": "DataLoader persistent_workers",
    "pin_memory": "DataLoader pin_memory",
    "batch_size": "the training batch size",
}

# framework → knob → its own words; a knob it lacks has no entry (nanoGPT has no DataLoader).
WORDS: dict[str, dict[str, str]] = {
    "transformers": {
        "eval_every": "a larger eval_steps (or eval_strategy='epoch')",
        "eval_size": "a smaller eval_dataset",
        "eval_batch": "a larger per_device_eval_batch_size",
        "eval_workers": "dataloader_num_workers (it serves evaluation too)",
        "save_every": "a larger save_steps (or save_strategy='epoch'), save_only_model=True "
        "when you will not resume, save_total_limit=N",
        "log_every": "a larger logging_steps (and no print in a callback's on_step_end)",
        "workers": "num_workers is dataloader_num_workers",
        "persistent_workers": "persistent_workers is dataloader_persistent_workers",
        "pin_memory": "pin_memory is dataloader_pin_memory",
        "batch_size": "batch_size is per_device_train_batch_size",
    },
    "lightning": {
        "eval_every": "Trainer(val_check_interval=...) or check_val_every_n_epoch=N",
        "eval_size": "Trainer(limit_val_batches=...)",
        "eval_batch": "a larger batch_size in val_dataloader()",
        "eval_workers": "DataLoader(num_workers=..., persistent_workers=True) in val_dataloader()",
        "save_every": "ModelCheckpoint(every_n_train_steps=... or every_n_epochs=1, "
        "save_weights_only=True, save_top_k=1), or Trainer(enable_checkpointing=False) "
        "where no checkpoint is needed",
        "log_every": "Trainer(log_every_n_steps=...), and self.log(..., on_step=False, "
        "on_epoch=True) for what you read per epoch",
        "workers": "num_workers=...",
        "persistent_workers": "persistent_workers=True",
        "pin_memory": "pin_memory=True",
        "batch_size": "batch_size=...",
    },
    "nanogpt": {
        "eval_every": "a larger eval_interval (iterations between evaluations)",
        "eval_size": "fewer eval_iters (batches per split in each evaluation)",
        "save_every": "always_save_checkpoint=False (a checkpoint only when the validation "
        "loss improves; saves come with the evaluations, every eval_interval)",
        "log_every": "a larger log_interval (each log reads loss.item(), a device sync)",
        "batch_size": "batch_size (the micro-batch)",
    },
    "timm": {
        "eval_every": "a larger --val-interval (epochs between validations)",
        "eval_batch": "-vb/--validation-batch-size",
        "eval_workers": "-j/--workers (its validation loader has as many)",
        "save_every": "--recovery-interval 0 (no recovery checkpoints) or larger, "
        "--checkpoint-hist N",
        "log_every": "a larger --log-interval",
        "workers": "-j/--workers N",
        "pin_memory": "--pin-mem",
        "batch_size": "-b/--batch-size",
    },
    "examples": {"workers": "-j/--workers N"},
}
# Where the words go, after them.
_WHERE = {
    "transformers": ", in TrainingArguments",
    "nanogpt": ", in its config (a config file, or --name=value on train.py's command line)",
    "timm": " on train.py's command line",
    "examples": " on its command line",
}
# The loader knobs: the Trainer builds the DataLoader, so its users never write one.
_LOADER = ("workers", "persistent_workers", "pin_memory", "batch_size")
_PREFIX = {
    "transformers": "the Trainer builds the DataLoader: ",
    "lightning": "the training DataLoader (given to Trainer.fit, or returned by "
    "train_dataloader() of the LightningModule or LightningDataModule): ",
}


def settings(*knobs: str) -> dict[str, str]:
    """A rule's ``settings``: per framework, its words for the knobs the rule's fix turns
    (frameworks without any of them are left out)."""
    unknown = [k for k in knobs if k not in KNOBS]
    if unknown:
        raise ValueError(f"unknown knob(s) {unknown}; known: {sorted(KNOBS)}")
    out = {}
    for fw, words in WORDS.items():
        if not uses_dataloader(fw) and any(k in _LOADER[:3] for k in knobs):
            continue  # a fix for its DataLoader: it has none
        said = [words[k] for k in knobs if k in words]
        if said:
            prefix = _PREFIX.get(fw, "") if any(k in _LOADER for k in knobs) else ""
            out[fw] = prefix + "; ".join(said) + _WHERE.get(fw, "")
    return out


def uses_dataloader(framework: str | None) -> bool:
    """False where the framework feeds its model without a torch DataLoader (nanoGPT's
    ``get_batch`` slices a memory-mapped file): no fix may give its loaders workers."""
    return framework != "nanogpt"


def detect(spans: Iterable[StackSpan], infos: Iterable[dict[str, Any]] = ()) -> str | None:
    """The framework whose training loop held the main thread longest; with no stacks (``run
    --no-stacks``), the one that called the first optimizer step (the probe's
    ``step_callers``); else what the script that runs (the outermost user ``<module>``)
    defines; None for a loop of one's own."""
    spans, infos = list(spans), list(infos)
    return _from_stacks(spans) or _from_step_callers(infos) or _from_script(spans, infos)


def _of_path(path: str) -> str | None:
    p = path.replace("\\", "/")
    return next((n for n, parts in _LOOP_FILES.items() if any(x in p for x in parts)), None)


def _callers(infos: Iterable[dict[str, Any]]) -> list[tuple[str, str]]:
    """The probe's ``step_callers`` (innermost first) as (function, file); [] if none."""
    for info in infos:
        callers = info.get("step_callers")
        if isinstance(callers, list):
            return [
                (f[0], f[1])
                for f in callers
                if isinstance(f, list)
                and len(f) == 2
                and isinstance(f[0], str)
                and isinstance(f[1], str)
            ]
    return []


def _from_step_callers(infos: Iterable[dict[str, Any]]) -> str | None:
    return next((n for n in (_of_path(p) for _f, p in _callers(infos)) if n is not None), None)


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


def _from_script(spans: list[StackSpan], infos: list[dict[str, Any]]) -> str | None:
    """What the job's scripts define: nanoGPT's config globals, timm's or pytorch/examples'
    command-line flags. The scripts are the user's own ``<module>`` frames in the stacks (the
    longest-running first; a wrapper that runs train.py with runpy has both), else in the
    frames that stepped the optimizer."""
    for path in (*_scripts_in_stacks(spans), *_scripts_in_callers(infos)):
        found = _of_script(path)
        if found is not None:
            return found
    return None


def _scripts_in_stacks(spans: list[StackSpan]) -> list[str]:
    seconds: dict[str, float] = {}
    for s in spans:
        for path in {f[1] for f in s.frames if f[0] == "<module>" and is_user_path(f[1])}:
            seconds[path] = seconds.get(path, 0.0) + (s.t1 - s.t0)
    return sorted(seconds, key=lambda p: -seconds[p])


def _scripts_in_callers(infos: list[dict[str, Any]]) -> list[str]:
    modules = [p for f, p in _callers(infos) if f == "<module>" and is_user_path(p)]
    return modules[::-1]  # innermost first: the outermost first now


@functools.lru_cache(maxsize=16)
def _of_script(path: str) -> str | None:
    facts = _facts(path)
    if facts is None:
        return None
    names, imports, flags = facts
    if {"eval_interval", "eval_iters", "log_interval", "iter_num"} <= names:
        return "nanogpt"
    if "timm" in imports and {"--pin-mem", "--workers"} <= flags:
        return "timm"
    if {"-j", "--workers"} <= flags:
        return "examples"
    return None


def _facts(path: str) -> tuple[set[str], set[str], set[str]] | None:
    """The script's module-level assigned names, its imported top-level packages, and the
    option strings of its ``add_argument`` calls; None where it cannot be read or parsed."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return None
    names: set[str] = set()
    for stmt in tree.body:
        targets: list[ast.expr] = stmt.targets if isinstance(stmt, ast.Assign) else []
        if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
            targets = [stmt.target]
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    imports: set[str] = set()
    flags: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imports.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            imports.add(node.module.split(".")[0])
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
        ):
            flags.update(
                a.value
                for a in node.args
                if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value[:1] == "-"
            )
    return names, imports, flags


def setting_fix(framework: str | None, settings: Mapping[str, str]) -> tuple[str, ...]:
    """The framework's own setting for a fix, as one more fix line (or none)."""
    if framework is None or framework not in settings:
        return ()
    return (f"with {NAMES[framework]}: {settings[framework]}",)
