"""Facts read once at the first optimizer step: callers, models, precision, unoptimized parameters.

Each read fails open: an error costs its own record (the report says so), never the job.
"""

from __future__ import annotations

import os
from typing import Any

from trainprof.probe import debug_modes, models, optimized, records, structure
from trainprof.probe.device_marks import start_timeline
from trainprof.probe.flops import StepFlops
from trainprof.probe.state import state
from trainprof.store.schema import ENV_FLOPS


def at_first_step(optimizer: Any) -> None:
    """Called by the optimizer post-hook (through ``steps._counts_as_step``) as the counted
    optimizer makes its first step."""
    _record_step_callers()
    found = _models_at_first_step(optimizer)
    _record_precision(optimizer, found.models)
    _record_unoptimized(optimizer, found)
    debug_modes.at_first_step()


def _record_step_callers() -> None:
    """The functions on the stack that steps the optimizer, read once, at the first step: the
    training loop and its train-step helpers as a fact. Stack samples alone can miss them (a
    loop whose steps take a few ms between long stalls gets a handful of backward samples)."""
    # from the optimizer hook up: above this, at_first_step and steps._counts_as_step
    records.record_callers("step_callers", 4, lines=False)


def _models_at_first_step(optimizer: Any) -> models.Found:
    """The job's models and its name for ``optimizer`` (``models.py``); the ``train()`` module
    alone where the frames cannot be read."""
    trained = state.model_ref() if state.model_ref is not None else None
    try:
        import torch

        return models.found(torch, trained, optimizer)
    except Exception as exc:
        records.record_error("models", exc)
        return models.Found([("model", trained)] if trained is not None else [], None)


def _record_precision(optimizer: Any, found: list[tuple[str, Any]]) -> None:
    """Where and in which dtype the model trains, and the TF32 settings: read once, at the
    first optimizer step, for the mixed-precision and pinned-memory rules."""
    try:
        import torch

        param = optimizer.param_groups[0]["params"][0]
        info: dict[str, Any] = {
            "device": param.device.type,
            "dtype": str(param.dtype).replace("torch.", ""),
            "matmul_precision": torch.get_float32_matmul_precision(),
            "cuda_matmul_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
            "cudnn_tf32": bool(torch.backends.cudnn.allow_tf32),
            "torch": str(torch.__version__),
            # the CUDA version torch was built for, None for a CPU-only build (no CUDA call)
            "cuda_build": torch.version.cuda,
            # torch's intra-op threads (one per core it sees: a container's host cores)
            "intra_op_threads": torch.get_num_threads(),
        }
        if param.device.type != "cuda":
            # a GPU hidden on purpose (CUDA_VISIBLE_DEVICES="") is no GPU left unused
            info["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
        if param.device.type == "cuda":
            info["capability"] = list(torch.cuda.get_device_capability(param.device))
            info["gpu_name"] = torch.cuda.get_device_name(param.device)
            start_timeline(torch, param.device)
            props = torch.cuda.get_device_properties(param.device)
            info["memory_total"] = props.total_memory
            # Which of the machine's GPUs this is, in NVML's terms (store/gpus.py).
            uuid = getattr(props, "uuid", None)
            if uuid is not None:
                info["gpu_uuid"] = str(uuid)
        counted = param.device.type == "cuda" or os.environ.get(ENV_FLOPS) == "cpu"
        if counted and "flops" not in records.disabled_parts():
            state.flops = StepFlops(torch)
        records.record_info({"precision": info})
        trained = state.model_ref() if state.model_ref is not None else None
        model = models.main_model(found, trained, optimizer)
        records.record_info({"structure": structure.facts(torch, model, optimizer)})
    except Exception as exc:
        records.record_error("precision", exc)


def _record_unoptimized(optimizer: Any, found: models.Found) -> None:
    """The job's models' parameters with a gradient that no optimizer made so far holds, once,
    at the first optimizer step (``optimized.py``); nothing where no model was found."""
    s = state
    if found.models:
        try:
            made = [opt for ref in s.made_optimizers if (opt := ref()) is not None]
            mine = made if any(opt is optimizer for opt in made) else [optimizer, *made]
            facts = optimized.facts(found.models, mine)
            records.record_info({"unoptimized": {**facts, "optimizer_name": found.optimizer_name}})
        except Exception as exc:
            records.record_error("unoptimized", exc)
    s.made_optimizers = []
