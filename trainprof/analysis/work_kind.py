"""The kind of work a main-thread stack sample does, read from its frames and its user line.

One classifier for every rule that names a cost, in ``run`` and ``attach`` alike: a wait off the
CPU (on a child process, a socket, a file, a lock, a sleep), formatting and logging, numpy,
torch's own operators, pickling, garbage collection, or the user's plain Python. py-spy
records with ``--idle``, so a thread blocked in a C call shows the Python frame that made it
(``Popen._try_wait``, ``socket.recv_into``); where the C call was made straight from the
user's line (``time.sleep``, ``f.read()``), the line's text says which it is. Pure.

Each kind has the words a finding uses for it and the fix for that kind of work
(``DESCRIBE``, ``FIX``); the hot line's own known call (``costly_calls``) is more specific and
comes first where the table knows it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping

from trainprof.analysis.usercode import (
    is_stdlib_path,
    is_torch_path,
    is_trainprof_path,
    is_user_path,
)
from trainprof.store.stacks import Frame, StackSpan

WAIT_CHILD = "wait_child"
WAIT_SOCKET = "wait_socket"
WAIT_FILE = "wait_file"
WAIT_LOCK = "wait_lock"
SLEEP = "sleep"
LOGGING = "logging"
NUMPY = "numpy"
TO_HOST = "to_host"
TORCH = "torch"
PICKLE = "pickle"
GC = "gc"
PYTHON = "python"

WAITS = frozenset({WAIT_CHILD, WAIT_SOCKET, WAIT_FILE, WAIT_LOCK, SLEEP})
# Kinds that are host work of the user's, wherever they run (in the loop, a hook, a Function).
HOST = frozenset({LOGGING, NUMPY, TO_HOST, PICKLE, GC, PYTHON}) | WAITS

DESCRIBE = {
    WAIT_CHILD: "waiting for a child process (subprocess, os.system)",
    WAIT_SOCKET: "waiting on the network (a socket, an HTTP request)",
    WAIT_FILE: "waiting on file I/O",
    WAIT_LOCK: "waiting on a lock, a queue or another thread",
    SLEEP: "sleeping",
    LOGGING: "formatting, printing or logging",
    NUMPY: "numpy on the host",
    TO_HOST: "copying tensors to Python lists or numbers (.tolist(), .item())",
    TORCH: "torch operators",
    PICKLE: "pickling",
    GC: "garbage collection",
    PYTHON: "the user's own Python",
}
FIX = {
    WAIT_CHILD: (
        "do not start a process every step: read the number in-process (/proc, "
        "resource.getrusage, psutil), or run the command every N steps in a background thread"
    ),
    WAIT_SOCKET: (
        "send it from a background thread (concurrent.futures.ThreadPoolExecutor) and do not "
        "wait for the answer, or batch it and send every N steps"
    ),
    WAIT_FILE: "read or write it once, outside the loop, or in a background thread",
    WAIT_LOCK: (
        "do not hold a lock the loop needs while another thread works: hand the work over "
        "through a queue the loop never waits on, or copy what it needs and release at once"
    ),
    SLEEP: "remove the sleep from the training loop",
    LOGGING: "log every N steps, and format numbers, not whole tensors",
    NUMPY: "keep it in torch operators on the tensor (no copy to numpy)",
    TO_HOST: (
        "keep it in torch operators on whole tensors, not Python lists and numbers element by "
        "element"
    ),
    TORCH: "do fewer, larger tensor operations (vectorise the Python loop around them)",
    PICKLE: "pickle less often, or only what changed",
    GC: "do not call gc.collect() every step; gc.freeze() once after setup",
    PYTHON: "vectorise it (torch or numpy on whole tensors)",
}

# Files whose frame says which kind of wait or work a stack is in, by path suffix.
_FILE_KINDS: tuple[tuple[str, str], ...] = (
    ("/subprocess.py", WAIT_CHILD),
    ("/socket.py", WAIT_SOCKET),
    ("/ssl.py", WAIT_SOCKET),
    ("/http/client.py", WAIT_SOCKET),
    ("/urllib/request.py", WAIT_SOCKET),
    ("/selectors.py", WAIT_SOCKET),
    ("/threading.py", WAIT_LOCK),
    ("/queue.py", WAIT_LOCK),
    ("/concurrent/futures/_base.py", WAIT_LOCK),
    ("/pickle.py", PICKLE),
    ("/copyreg.py", PICKLE),
    ("/_tensor_str.py", LOGGING),
    ("/arrayprint.py", LOGGING),  # numpy's array formatter (np.array2string, repr)
    ("/reprlib.py", LOGGING),
    ("/pprint.py", LOGGING),
)
_LIB_DIRS: tuple[tuple[str, str], ...] = (
    ("/requests/", WAIT_SOCKET),
    ("/urllib3/", WAIT_SOCKET),
    ("/httpx/", WAIT_SOCKET),
    ("/logging/", LOGGING),
    ("/tqdm/", LOGGING),
    ("/numpy/", NUMPY),
    ("/scipy/", NUMPY),
)
# The user's line itself makes the C call that holds the thread: its text says which.
_LINE_KINDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bos\.(system|popen|wait\w*)\s*\("), WAIT_CHILD),
    (re.compile(r"\bsubprocess\."), WAIT_CHILD),
    (re.compile(r"\b(time\.)?sleep\s*\("), SLEEP),
    (re.compile(r"\bgc\.collect\s*\("), GC),
    (re.compile(r"\b(pickle|cloudpickle|marshal)\.(dump|load)s?\s*\("), PICKLE),
    (re.compile(r"\.(recv\w*|send\w*|accept|connect)\s*\("), WAIT_SOCKET),
    (re.compile(r"\.acquire\s*\(|\.join\(\s*(timeout\s*=\s*[\w.]+)?\s*\)|\bwith\s+[\w.]*lock\w*\s*:", re.I), WAIT_LOCK),
    (re.compile(r"\b(open|os\.read|os\.write)\s*\(|\.(read|readline|readlines|flush)\(\)"), WAIT_FILE),
    (re.compile(r"\b(print|logging\.\w+|log(ger)?\.\w+)\s*\(|\.write\s*\(|\bf\".*\{"), LOGGING),
    (re.compile(r"\bnp\.|\bnumpy\.|\.numpy\(\)"), NUMPY),
    (re.compile(r"\.(tolist|item)\(\)"), TO_HOST),
)  # fmt: skip
_TORCH_LINE = re.compile(r"\btorch\.|\bF\.|\bnn\.|\.(sum|mean|matmul|mm|bmm|view|reshape)\(|@")


def of_frames(frames: tuple[Frame, ...], source: Mapping[tuple[str, int], str]) -> str:
    """The kind of work one stack does, by what the user's innermost line calls: the library
    it enters decides (``subprocess.run`` waits for a child even where the innermost frame is
    a selector), tensor formatting anywhere below is logging, and a line that makes the C call
    itself (``time.sleep``, ``arr.sum()``) is told by its text."""
    at = _innermost_user_index(frames)
    below = frames[at + 1 :] if at is not None else frames
    paths = [f[1].replace("\\", "/") for f in below]
    if any(p.endswith(("/_tensor_str.py", "/arrayprint.py")) for p in paths):
        return LOGGING
    for name, p in zip((f[0] for f in below), paths, strict=True):
        kind = _of_path(p)
        if kind is not None:
            return kind
        if p.endswith("/gc.py") or (name == "collect" and is_stdlib_path(p)):
            return GC
    if any(is_torch_path(p) for p in paths):
        return TORCH
    if not below and at is not None:
        f = frames[at]
        return _of_line(source.get((f[1], f[2]), ""))
    return PYTHON


def _of_path(p: str) -> str | None:
    for suffix, kind in _FILE_KINDS:
        if p.endswith(suffix):
            return kind
    for part, kind in _LIB_DIRS:
        if part in p:
            return kind
    return None


def _innermost_user_index(frames: tuple[Frame, ...]) -> int | None:
    for i in range(len(frames) - 1, -1, -1):
        if frames[i][1] and is_user_path(frames[i][1]):
            return i
    return None


def of_line(text: str) -> str:
    """The kind of work a user line does where it makes the C call itself (no frame below)."""
    return _of_line(text)


def _of_line(text: str) -> str:
    for pattern, kind in _LINE_KINDS:
        if pattern.search(text):
            return kind
    return TORCH if _TORCH_LINE.search(text) else PYTHON


# Standard-library files that only wrap a call (a decorator, a context manager): not work.
_WRAPPERS = re.compile(r"/(contextlib|functools|typing|abc|enum|weakref|_weakrefset)\.py$")


def is_host(frames: tuple[Frame, ...], source: Mapping[tuple[str, int], str]) -> bool:
    """The stack's innermost work is host work, not torch's operators nor a model library's
    tensor code: numpy, the standard library's Python, a wait, logging, pickling, or a user
    line that copies tensors to the host (``.numpy()``, ``.tolist()``)."""
    if not frames:
        return False
    p = frames[-1][1].replace("\\", "/")
    if is_torch_path(p) or is_trainprof_path(p):
        return False  # torch's own code, or trainprof's probe hooks
    if is_stdlib_path(p) and not _WRAPPERS.search(p):
        return True
    kind = of_frames(frames, source)
    if kind == PYTHON and is_user_path(p):
        # the interpreter itself at work on the user's line: a loop's or a branch's header, or
        # scalar arithmetic on Python numbers (a mask filled pixel by pixel); a line that only
        # calls a tensor operator (``x * mask``) is the model's
        return interpreting(source.get((frames[-1][1], frames[-1][2]), ""))
    return kind in HOST - {PYTHON}


# A line the interpreter runs by itself: a loop's or a branch's header, or scalar arithmetic
# through ``math`` and the builtins; never one that names torch (``_TORCH_LINE``).
_INTERPRETER_LINE = re.compile(
    r"^\s*(for|while|if|elif)\b|\bmath\.\w+\(|(?<![.\w])(min|max|abs|range|len|int|float|round)\("
)


def interpreting(text: str) -> bool:
    """The line is the interpreter's own work on Python objects, not a tensor operator's."""
    return bool(_INTERPRETER_LINE.search(text)) and not _TORCH_LINE.search(text)


def dominant(
    spans: Iterable[StackSpan], source: Mapping[tuple[str, int], str], frame: Frame
) -> str | None:
    """The kind of work that holds the stacks whose innermost user frame is ``frame`` longest;
    None where no stack has it."""
    kinds: Counter[str] = Counter()
    seen: dict[int, str] = {}
    for s in spans:
        if _innermost_user(s.frames) != frame:
            continue
        kind = seen.get(id(s.frames))
        if kind is None:
            kind = seen[id(s.frames)] = of_frames(s.frames, source)
        kinds[kind] += int((s.t1 - s.t0) * 1e6)
    return kinds.most_common(1)[0][0] if kinds else None


def _innermost_user(frames: tuple[Frame, ...]) -> Frame | None:
    at = _innermost_user_index(frames)
    return frames[at] if at is not None else None


def inside_model(spans: Iterable[StackSpan], frame: Frame) -> str | None:
    """ "forward" or "backward" where the stacks that run ``frame`` mostly run it from inside a
    module's call or autograd's backward (a hook, a custom autograd.Function); else None."""
    where: Counter[str] = Counter()
    for s in spans:
        if frame not in s.frames:
            continue
        outer = s.frames[: s.frames.index(frame)]
        paths = [f[1].replace("\\", "/") for f in outer]
        if any(
            p.endswith("torch/autograd/graph.py") or "torch/autograd/__init__" in p for p in paths
        ):
            where["backward"] += int((s.t1 - s.t0) * 1e6)
        elif any("torch/nn/modules/" in p for p in paths):
            where["forward"] += int((s.t1 - s.t0) * 1e6)
        else:
            where["loop"] += int((s.t1 - s.t0) * 1e6)
    top = where.most_common(1)[0][0] if where else None
    return top if top in ("forward", "backward") else None
