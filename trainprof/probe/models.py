"""The job's models, found once, at the first optimizer step, each with the name its training
loop calls it by.

The probe has long known the model as the module the job calls ``train()`` on at the top level.
Most scripts never call it (a module is built in training mode): every GPU zoo case, and a
fine-tuning script whose new head never trained, got no structure check and no unoptimized-
parameters check. So the frames that called ``optimizer.step()`` are read as well: the
``nn.Module`` values among their locals, one attribute deep (``self.model``,
``trainer.model``), and among their modules' globals. Of those, the ones inside no other found
are the job's models: the network, and beside it a loss with weights of its own (a margin head
built as the criterion), a teacher, a GAN's two halves.

Cost: once a process, at the first optimizer step: the locals of a few frames, their modules'
globals, and one pass over each found module's submodules; no tensor is read.
"""

from __future__ import annotations

import inspect
import os
import sys
import types
from dataclasses import dataclass
from typing import Any

MAX_FRAMES = 6  # frames above the step outside torch: the loop, its helpers, main(), <module>
_SKIPPED = (types.ModuleType, types.FunctionType, types.MethodType, type)
# The probe's own frames (its hooks); not all of trainprof's: the zoo's scripts are user code
_PROBE = os.path.dirname(os.path.abspath(__file__))


@dataclass(frozen=True)
class Found:
    models: list[tuple[str, Any]]  # (the name the loop gives it, the module), top-level ones
    optimizer_name: str | None  # the stepped optimizer's name in the loop (None: not held)


def found(torch: Any, trained: Any, optimizer: Any) -> Found:
    """The top-level modules of the job: the one it called ``train()`` on (``trained``, may be
    None) first, then those held by the frames above the caller outside torch and the probe,
    innermost first; and the name they give ``optimizer``. ``trained`` is named as a frame
    names it, else ``model``."""
    module_type = torch.nn.Module
    torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
    named: list[tuple[str, Any]] = []
    seen: set[int] = set()
    optimizer_names: list[str] = []

    def add(name: str, value: Any) -> None:
        if value is optimizer and optimizer is not None:
            optimizer_names.append(name)
        elif isinstance(value, module_type) and id(value) not in seen:
            seen.add(id(value))
            named.append((name, value))

    frame: types.FrameType | None = sys._getframe(1)
    frames = 0
    scanned_globals: set[int] = set()
    while frame is not None and frames < MAX_FRAMES:
        filename = os.path.abspath(frame.f_code.co_filename)
        if not filename.startswith((torch_dir, _PROBE)):
            frames += 1
            for name, value in _locals(frame):
                add(name, value)
                if not isinstance(value, (module_type, *_SKIPPED)):
                    attrs = getattr(value, "__dict__", None)
                    for attr, inner in list(attrs.items()) if isinstance(attrs, dict) else ():
                        add(f"{name}.{attr}", inner)
            if id(frame.f_globals) not in scanned_globals:
                scanned_globals.add(id(frame.f_globals))
                for name, value in list(frame.f_globals.items()):
                    add(name, value)
        frame = frame.f_back
    tops = _top_level(named)
    optimizer_name = optimizer_names[0] if optimizer_names else None
    if trained is None:
        return Found(tops, optimizer_name)
    label = next((n for n, mod in named if mod is trained), "model")
    rest = [(n, m) for n, m in tops if m is not trained]
    return Found([(label, trained), *rest], optimizer_name)


def _locals(frame: types.FrameType) -> list[tuple[str, Any]]:
    """A frame's local variables, leaving the frame as it was. Before Python 3.13, reading
    ``f_locals`` of a function's frame copies its locals into a dict that the frame keeps
    until it ends: the first step's batch, its loader's iterator, stayed alive for the whole
    of ``main()``. The zoo's low-open-files job held its first batch's shared-memory
    descriptors that way, and crashed where it hangs without the probe. So that copy is
    emptied again (Python fills it afresh whenever it is read; a module's or a class body's
    namespace is no copy and is left alone)."""
    namespace = frame.f_locals
    items = list(namespace.items())
    optimized = frame.f_code.co_flags & inspect.CO_OPTIMIZED
    if sys.version_info < (3, 13) and optimized and isinstance(namespace, dict):
        if namespace is not frame.f_globals:
            namespace.clear()
    return items


def _top_level(named: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """Those of ``named`` that are no submodule of another of them."""
    inside: set[int] = set()
    for _name, mod in named:
        inside.update(id(sub) for sub in mod.modules() if sub is not mod)
    return [(name, mod) for name, mod in named if id(mod) not in inside]


def main_model(models: list[tuple[str, Any]], trained: Any, optimizer: Any) -> Any:
    """The model the structure check reads: the one ``train()`` was called on, else the one
    holding most of the stepped optimizer's parameters (None: none holds any)."""
    if trained is not None:
        return trained
    stepped = {id(p) for group in optimizer.param_groups for p in group.get("params", ())}
    best, best_n = None, 0
    for _name, mod in models:
        n = sum(1 for p in mod.parameters() if id(p) in stepped)
        if n > best_n:
            best, best_n = mod, n
    return best
