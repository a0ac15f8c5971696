"""Keep torch.compile's tracer (Dynamo) out of the probe's own code.

A job that compiles code which calls the probe's hooks (its optimizer step, whose wrapper runs
the global step hooks; a step that calls ``zero_grad``) has Dynamo trace them as its own: it
warns on the job's stderr that it cannot trace ``time.monotonic`` and ``sys._getframe``, and
spends compile attempts on each hook. Once the job imports ``torch._dynamo`` (a job that
compiles does; ``import torch`` alone does not), the probe's package joins Dynamo's skip
directories, like the standard library's: Dynamo runs the probe's functions as they are, and
never guards on the probe's state."""

from __future__ import annotations

from types import ModuleType

from trainprof.probe import compiles, records
from trainprof.probe.import_hook import call_after_import

PACKAGE = "trainprof.probe"


def install() -> None:
    call_after_import("torch._dynamo", _on_dynamo_imported)


def _on_dynamo_imported(dynamo: ModuleType) -> None:
    _skip_probe(dynamo)
    if "compile" not in records.disabled_parts():
        compiles.install(dynamo)  # each compile's time, and why Dynamo compiled again


def _skip_probe(_dynamo: ModuleType) -> None:
    try:
        import torch._dynamo.trace_rules as rules  # part of what the job just imported

        rules.add(PACKAGE)
    except Exception as exc:  # an older or newer torch without it: Dynamo traces the hooks
        records.record_error("torch._dynamo skip", exc)
