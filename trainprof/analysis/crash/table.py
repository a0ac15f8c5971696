"""The signature table: one row per crash finding id, most specific first (a line used by a row
is not offered to the rows below it), each with literal needles, patterns and a builder."""

from __future__ import annotations

import re

from trainprof.analysis.crash.builders.collate import TENSOR_ATTRS, build_collate
from trainprof.analysis.crash.builders.cuda_oom import (
    OOM_ANY,
    OOM_NEW,
    OOM_OLD,
    OOM_RAW,
    build_cuda_oom,
)
from trainprof.analysis.crash.builders.fd import build_fd
from trainprof.analysis.crash.builders.host_oom import KILLED, REFUSED, build_host_oom
from trainprof.analysis.crash.builders.killed import build_killed
from trainprof.analysis.crash.builders.ragged import RESIZE, SIZES_OLD, STACK, build_ragged
from trainprof.analysis.crash.builders.reset import build_reset
from trainprof.analysis.crash.builders.shape import build_shape
from trainprof.analysis.crash.builders.shm import build_shm
from trainprof.analysis.crash.row import Signature


def _rx(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p) for p in patterns)


SIGNATURES: tuple[Signature, ...] = (
    Signature(
        "ragged-batch",
        (
            "stack expects each tensor",
            "Sizes of tensors must match",
            "resize storage that is not resizable",
        ),
        (STACK, SIZES_OLD, RESIZE),
        build_ragged,
    ),
    Signature(
        "collate-structure",
        (
            "indices must be integers",
            "object has no attribute",
            "KeyError",
            "values to unpack",
            "must be Tensor, not",
            "string indices must be",
        ),
        _rx(
            r"^TypeError: (list|tuple) indices must be integers or slices, not (str|tuple|dict|list)",
            rf"^AttributeError: '(list|tuple|dict|str)' object has no attribute '({TENSOR_ATTRS})'",
            r"^KeyError: (.+)$",
            r"^ValueError: (too many|not enough) values to unpack \(expected (\d+)(?:, got (\d+))?\)",
            r"^TypeError: (\w+)\(\): argument '(\w+)' (?:\(position \d+\) )?must be Tensor, "
            r"not (str|list|dict|tuple)",
            r"^TypeError: string indices must be integers",
        ),
        build_collate,
    ),
    Signature(
        "shape-mismatch",
        (
            "Dimension out of range",
            "cannot be multiplied",
            "size mismatch, m1",
            "Expected ",
            "Given groups",
            "must match the size of tensor",
            "is invalid for input of size",
            "running_mean should contain",
            "Sizes of tensors must match",
            "stack expects each",
            "is not equal to len(dims)",
        ),
        _rx(
            r"Dimension out of range \(expected to be in range of \[(-?\d+), (-?\d+)\], "
            r"but got (-?\d+)\)",
            r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)",
            r"size mismatch, m1: \[(\d+) x (\d+)\], m2: \[(\d+) x (\d+)\]",
            r"Expected (\d+)D \(unbatched\) or (\d+)D \(batched\) input to (\w+), "
            r"but got input of size: \[([^\]]*)\]",
            r"Expected (\d+)-dimensional input for (\d+)-dimensional weight \[([^\]]*)\], "
            r"but got (\d+)-dimensional input of size \[([^\]]*)\] instead",
            r"Given groups=(\d+), weight of size \[([^\]]*)\], expected input\[([^\]]*)\] "
            r"to have (\d+) channels, but got (\d+) channels instead",
            r"The size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) "
            r"at non-singleton dimension (\d+)",
            r"Expected input batch_size \((\d+)\) to match target batch_size \((\d+)\)",
            r"shape '\[([^\]]*)\]' is invalid for input of size (\d+)",
            r"Expected more than 1 value per channel when training, got input size "
            r"(?:torch\.Size\()?\[([^\]]*)\]",
            r"running_mean should contain (\d+) elements not (\d+)",
            r"Sizes of tensors must match except in dimension (\d+)",
            r"stack expects each tensor to be equal size",
            r"Expected target size (\[[^\]]*\]|\([^)]*\)), got (\[[^\]]*\]|\([^)]*\))",
            r"input\.dim\(\) = (\d+) is not equal to len\(dims\) = (\d+)",
        ),
        build_shape,
    ),
    Signature(
        "cuda-oom",
        (
            "out of memory",
            "CUBLAS_STATUS_ALLOC_FAILED",
            "cudaErrorMemoryAllocation",
            "CUDA_ERROR_OUT_OF_MEMORY",
        ),
        (OOM_NEW, OOM_OLD, OOM_RAW, OOM_ANY),
        build_cuda_oom,
    ),
    Signature(
        "worker-shm-limit",
        (
            "bus error",
            "Bus error",
            "out of shared memory",
            "No space left on device",
            "unable to write to file <",
            "insufficient shared memory",
        ),
        _rx(
            r"Unexpected bus error encountered in worker",
            r"DataLoader worker \(pid (\d+)\) is killed by signal: Bus error",
            r"out of shared memory",
            r"unable to [^<]{1,60}<(/?torch_[^>]*)>[^:]{0,80}: No space left on device",
            r"unable to write to file <(/?torch_[^>]*)>",
            r"No space left on device.{0,200}/dev/shm|/dev/shm.{0,200}No space left on device",
            r"insufficient shared memory",
        ),
        build_shm,
    ),
    Signature(
        "worker-fd-limit",
        (
            "Too many open files",
            "ancdata",
            "unable to open shared memory object",
            "EMFILE",
            "Errno 24",
        ),
        _rx(
            r"Too many open files\. Communication with the workers is no longer possible",
            r"received (\d+) items of ancdata",
            r"unable to open shared memory object <(/?torch_[^>]*)> in read-write mode"
            r"(?:: ([^()]*?) \((\d+)\))?",
            r"\[Errno 24\]|Too many open files|\bEMFILE\b",
        ),
        build_fd,
    ),
    Signature(
        "worker-killed",
        ("DataLoader worker", "encountered in worker"),
        _rx(
            r"DataLoader worker \(pid (\d+)\) is killed by signal: ([^.]+)\.",
            r"DataLoader worker \(pid (\d+)\) exited unexpectedly with exit code (-?\d+)",
            r"DataLoader worker \(pid\(s\) ([\d, ]+)\) exited unexpectedly",
            r"Unexpected (segmentation fault|floating-point exception) encountered in worker",
        ),
        build_killed,
    ),
    Signature(
        "host-oom",
        (
            "Killed",
            "Out of memory",
            "oom-kill",
            "DefaultCPUAllocator",
            "MemoryError",
            "bad_alloc",
        ),
        (*KILLED, *REFUSED),
        build_host_oom,
    ),
    Signature(
        "worker-reset",
        ("ConnectionResetError", "Connection reset by peer"),
        _rx(
            r"ConnectionResetError: \[Errno 104\] Connection reset by peer",
            r"ConnectionResetError\(104, 'Connection reset by peer'\)",
            r"\[Errno 104\] Connection reset by peer",
        ),
        build_reset,
    ),
)
