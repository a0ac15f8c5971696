"""The only environment variables doctor may print: ones that steer training performance.

Everything doctor shows about the environment goes through ``visible_env`` so a token or key in
the environment (HF_TOKEN, AWS_SECRET_ACCESS_KEY, ...) can never reach its output or JSON.
"""

from __future__ import annotations

from collections.abc import Mapping

ALLOWLIST: tuple[str, ...] = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_LAUNCH_BLOCKING",
    "CUDA_DEVICE_ORDER",
    "PYTORCH_CUDA_ALLOC_CONF",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NCCL_DEBUG",
    "NCCL_P2P_DISABLE",
    "NCCL_IB_DISABLE",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "WORLD_SIZE",
    "LOCAL_RANK",
)
MAX_VALUE_CHARS = 120


def visible_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The allowlisted variables that are set, values truncated to one short line."""
    out = {}
    for name in ALLOWLIST:
        if name in environ:
            value = environ[name].replace("\n", " ")
            if len(value) > MAX_VALUE_CHARS:
                value = value[:MAX_VALUE_CHARS] + "..."
            out[name] = value
    return out
