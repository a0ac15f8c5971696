"""Which code held the main thread: classify stack spans, and name the user's own line.

Pure: spans and source lines come from the Session. ``compile`` (Dynamo/Inductor compiling,
anywhere in the stack) first; then ``anomaly`` (autograd's anomaly detection keeping the stack
of an op); then, innermost-first: ``save`` (torch.serialization, safetensors' save_file,
Lightning's _atomic_save), ``data`` (torch.utils.data), ``optimizer`` (torch.optim),
``backward`` (autograd), ``forward`` (nn.Module calls), ``logging`` (logging, tqdm, tensor or array
formatting, or a user line that prints/logs/writes), ``sync`` (on CUDA only: a user line that
copies a device tensor to the host), ``idle`` (sleeping or blocked waiting: I/O, a lock, a
socket), and ``other`` (the rest: host work in the user's loop).
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainprof.analysis import work_kind
from trainprof.analysis.usercode import is_user_path
from trainprof.store.stacks import Frame, StackSpan

_PRINTING = re.compile(
    r"\b(print|log(ger|ging)?\.\w+|logging\.\w+|\w*\.write|tqdm|pbar\.\w+|set_postfix|writer\.add_\w+)\s*\("
)
# A line that copies a device tensor to the host, which on CUDA waits for the GPU to finish.
SYNC_LINE = re.compile(
    r"\.(item|cpu|tolist|numpy)\(\)|torch\.cuda\.synchronize\(|\.to\([\"']cpu[\"']"
)
ZERO_GRAD_LINE = re.compile(r"\.zero_grad\(")
# A parameter updated by hand (``p.sub_(lr * v)``, ``v.mul_(m).add_(p.grad)``): the optimizer
# step of a loop without torch.optim, not loop overhead.
UPDATE_LINE = re.compile(r"\.(add|sub|mul|div|addcmul|addcdiv|lerp|copy|zero|clamp)_\(")
# Python functions whose innermost frame means the thread waits in a C call (py-spy shows no
# native frames): locks, queues, selectors, sockets, subprocesses.
_IDLE_FUNCS = {
    "sleep", "wait", "acquire", "select", "poll", "_wait_for_tstate_lock", "get", "readinto",
    "recv", "recv_into", "recvfrom", "accept", "connect", "create_connection", "sendall",
    "_recv_bytes", "_poll", "communicate", "waitpid", "_try_wait", "epoll", "join",
}  # fmt: skip
# Checkpoint writers besides torch.serialization, by the file's last two path parts.
_SAVE_FUNCS = {
    "safetensors/torch.py": ("save_file", "save_model"),
    "utilities/cloud_io.py": ("_atomic_save",),  # Lightning: torch.save to memory, then a write
}
# Files that run only while torch.compile compiles (not when compiled code runs).
_COMPILE_FILES = (
    "torch/_dynamo/convert_frame.py", "torch/_dynamo/symbolic_convert.py",
    "torch/_dynamo/output_graph.py", "torch/_inductor/compile_fx.py", "torch/_inductor/graph.py",
    "torch/_inductor/scheduler.py", "torch/_inductor/codecache.py",
    "torch/_inductor/async_compile.py", "torch/_inductor/select_algorithm.py",
    "torch/_functorch/aot_autograd.py", "torch/_functorch/partitioners.py",
)  # fmt: skip
# Functions of those files that run the compiled code at every call: AOTAutograd's forward
# wraps every compiled graph (under Inductor too), so a compiled model's steps are not compiles.
_COMPILED_CODE_RUNS = frozenset({"aot_module_simplified.<locals>.forward"})


def short_name(qualname: str) -> str:
    """py-spy names functions by qualname (``Class.method``, ``f.<locals>.g``)."""
    return qualname.rsplit(".", 1)[-1]


def is_user_file(path: str) -> bool:
    return bool(path) and is_user_path(path)


def user_frame(frames: tuple[Frame, ...]) -> Frame | None:
    """The innermost frame in the user's own code (not torch, not the stdlib, not trainprof)."""
    for frame in reversed(frames):
        if is_user_file(frame[1]):
            return frame
    return None


def where(frame: Frame | None) -> str | None:
    """``file:line (function)``, the function as a reader finds it in the file (no genexpr)."""
    if frame is None:
        return None
    return f"{frame[1]}:{frame[2]} ({named(frame[0])})"


# A comprehension, generator expression or lambda inside a function: named by that function.
_ANONYMOUS_TAIL = re.compile(
    r"(?:\.<locals>)?(?:\.<(?:genexpr|listcomp|dictcomp|setcomp|lambda)>)+$"
)


def named(qualname: str) -> str:
    """``ProgressBar._render.<locals>.<genexpr>`` → ``ProgressBar._render``; others unchanged."""
    return _ANONYMOUS_TAIL.sub("", qualname) or qualname


def is_compiling(frames: tuple[Frame, ...]) -> bool:
    """A compiler function runs, not under an import of its module: the first optimizer step
    (and a TorchDispatchMode's first op) imports torch._dynamo, whose import runs functions of
    those files: start-up, not compiling (an H200 run of an fp32 job with no torch.compile at
    all was said to have 39.5 ms of compile). Imports inside a real compile still count."""
    for name, path, _line in frames:  # outermost first
        if "importlib._bootstrap" in path:
            return False
        if name in _COMPILED_CODE_RUNS:
            return False
        if name != "<module>" and any(c in path for c in _COMPILE_FILES):
            return True
    return False


def keeps_anomaly_stack(frames: tuple[Frame, ...]) -> bool:
    """Autograd's anomaly detection keeping the Python stack of an op it records: its C++ calls
    ``torch.fx.traceback.format_stack`` straight from the op, so no torch.fx frame is above it
    (FX's own tracing calls it from torch/fx)."""
    for i, (name, path, _line) in enumerate(frames):
        if short_name(name) == "format_stack" and path.replace("\\", "/").endswith(
            "torch/fx/traceback.py"
        ):
            return i == 0 or "torch/fx/" not in frames[i - 1][1].replace("\\", "/")
    return False


def category(
    frames: tuple[Frame, ...], source: dict[tuple[str, int], str], cuda: bool = False
) -> str:
    if is_compiling(frames):
        return "compile"
    if keeps_anomaly_stack(frames):
        return "anomaly"
    for frame in reversed(frames):
        name, path, _line = frame
        p = path.replace("\\", "/")
        if is_save(frame):
            return "save"
        if "torch/utils/data/" in p:
            return "data"
        if "torch/optim/" in p:
            return "optimizer"
        if _runs_backward(name, p):
            # the user's host work called from inside it (a custom Function's backward in
            # numpy) is host work, not autograd's
            return _host_inside(frames, source, cuda) or "backward"
        if "_tensor_str.py" in p or "/arrayprint.py" in p or "/logging/" in p or "/tqdm/" in p:
            return "logging"
        if "torch/nn/modules/" in p or "torch/nn/functional.py" in p:
            # a loss or activation called as F.cross_entropy(...) is forward work too (it was
            # "other host work" and pushed a cpu-stall job's loop-overhead to its threshold);
            # a module's forward run again by autograd (activation checkpointing recomputes
            # it) is backward time (it was "forward", 3.9 s of a 24 s run); building the model
            # is neither (a restart's Conv2d.__init__ was "forward")
            if any(_runs_backward(n, f) for n, f, _l in frames):
                return _host_inside(frames, source, cuda) or "backward"
            if _builds_modules(frames):
                return "other"
            return _host_inside(frames, source, cuda) or "forward"
    top = frames[-1] if frames else None
    uf = user_frame(frames)
    if uf is not None:
        text = source.get((uf[1], uf[2]), "")
        if ZERO_GRAD_LINE.search(text) or UPDATE_LINE.search(text):
            # zero_grad runs behind torch's dynamo-disable wrapper: samples in that wrapper
            # have no torch/optim frame yet, but the time is the optimizer's
            return "optimizer"
        if cuda and SYNC_LINE.search(text):
            # before printing: print(loss.item()) waits for the GPU far longer than it prints
            return "sync"
        if _PRINTING.search(text):
            return "logging"
        if uf is top and work_kind.of_line(text) in work_kind.WAITS:
            return "idle"  # the line itself waits: a sleep, a lock, a read, a child process
    if top is not None and short_name(top[0]) in _IDLE_FUNCS and not is_user_file(top[1]):
        return "idle"
    return "other"


def _host_inside(
    frames: tuple[Frame, ...], source: dict[tuple[str, int], str], cuda: bool
) -> str | None:
    """ "logging" or "other" where a forward or backward stack's innermost work is the user's
    host work called from inside it (a forward hook copying activations to numpy, a custom
    autograd.Function computing in numpy, a print in the model's forward): the user's code with
    a line and a fix, not the model's operators; on CUDA, a copy to the host there is a sync.
    None where it is torch's own work."""
    if not work_kind.is_host(frames, source):
        return None
    kind = work_kind.of_frames(frames, source)
    top = frames[-1]
    if cuda and is_user_file(top[1]) and SYNC_LINE.search(source.get((top[1], top[2]), "")):
        return "sync"  # on a GPU, a copy to the host waits for the kernels that make it
    return "logging" if kind == work_kind.LOGGING else "other"


# Functions that run autograd's backward, by file. Not every torch/autograd frame: a function
# decorated with @torch.no_grad() runs under grad_mode.py's wrapper (an evaluation, an EMA
# update), and a custom Function's forward under function.py's apply.
_BACKWARD_FUNCS = {
    "torch/autograd/__init__.py": ("backward", "grad"),
    "torch/autograd/graph.py": ("_engine_run_backward",),
    "torch/autograd/function.py": ("BackwardCFunction.apply",),
    "torch/_tensor.py": ("Tensor.backward", "backward"),
}


def _runs_backward(name: str, path: str) -> bool:
    p = path.replace("\\", "/")
    for suffix, names in _BACKWARD_FUNCS.items():
        if p.endswith(suffix):
            return name in names or short_name(name) in names
    return False


_CONSTRUCTION = ("__init__", "reset_parameters")


def _builds_modules(frames: tuple[Frame, ...]) -> bool:
    return any(
        short_name(name) in _CONSTRUCTION and "torch/nn/modules/" in path.replace("\\", "/")
        for name, path, _line in frames
    )


def categoriser(
    source: dict[tuple[str, int], str], cuda: bool = False
) -> Callable[[tuple[Frame, ...]], str]:
    """``category`` for passes over spans that stay alive meanwhile, judged once per distinct
    stack: the loader interns stacks, so a long run's millions of spans share a few hundred
    tuples (the spans keep them alive, so no id is reused; a 2-minute attach judged 126,000
    spans' stacks one by one)."""
    seen: dict[int, str] = {}

    def of(frames: tuple[Frame, ...]) -> str:
        cat = seen.get(id(frames))
        if cat is None:
            cat = seen[id(frames)] = category(frames, source, cuda)
        return cat

    return of


def data_part(frames: tuple[Frame, ...]) -> str:
    """Which ledger bucket a DataLoader stack of the main thread fills. ``transfer``: receiving
    a worker's batch: rebuilding its tensors (with the default file_descriptor sharing, a new
    connection to the worker, with its authentication handshake, per tensor), or reading and
    unpickling what is not a tensor (a numpy array, Python objects) from the workers' queue;
    waiting for a batch there (``poll``) is ``data_wait``."""
    names = [short_name(f[0]) for f in frames]
    paths = [f[1].replace("\\", "/") for f in frames]
    if "_next_index" in names:
        return "sampler"
    if any(
        "torch/multiprocessing/reductions.py" in p
        or p.endswith("multiprocessing/resource_sharer.py")
        for p in paths
    ):
        return "transfer"
    if any(p.endswith("multiprocessing/queues.py") for p in paths) and not any(
        n in ("poll", "_poll", "wait") for n in names
    ):
        return "transfer"
    if any(n in ("__getitem__", "__getitems__") for n in names):
        return "fetch"
    if any("_utils/collate.py" in p for p in paths) or any("collate" in n for n in names):
        return "collate"
    if any("pin_memory.py" in p for p in paths):
        return "pin"
    if any(p.endswith("_utils/fetch.py") for p in paths):
        return "fetch"
    return "data_wait"


@dataclass(frozen=True)
class Profile:
    """Main-thread time by category within a window, the user lines behind each, and the
    DataLoader's time by ledger part (``data_part``)."""

    seconds: dict[str, float]
    lines: dict[str, Counter[Frame]]
    data_parts: dict[str, float] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return sum(self.seconds.values())

    def share(self, cat: str) -> float:
        total = self.total
        return self.seconds.get(cat, 0.0) / total if total > 0 else 0.0

    def top_line(self, cat: str) -> Frame | None:
        counter = self.lines.get(cat)
        if not counter:
            return None
        return counter.most_common(1)[0][0]


# A line that calls backward (``loss.backward()``, ``accelerator.backward(loss)``), not a hook
# named after it (``cb.on_after_backward(self, step)``): a torn py-spy sample of backward under
# such a hook's line made every stack under that hook the forward pass.
_CALLS_BACKWARD = re.compile(r"\b(?:manual_)?backward\s*\(")


def backward_sites(
    spans: Iterable[StackSpan],
    source: dict[tuple[str, int], str],
    cuda: bool = False,
    category_of: Callable[[tuple[Frame, ...]], str] | None = None,
) -> dict[tuple[str, str], int]:
    """(function, file) → the last line where the user's code calls ``backward`` (the innermost
    user frame of backward samples, where that line says ``backward``: ``loss.backward()``,
    ``scaler.scale(loss).backward()``, ``accelerator.backward(loss)``). A framework's
    ``trainer.fit(model)`` line, under which backward runs too, is not one."""
    sites: dict[tuple[str, str], int] = {}
    category_of = category_of or categoriser(source, cuda)
    for s in spans:
        if category_of(s.frames) != "backward":
            continue
        uf = user_frame(s.frames)
        if uf is None or not _CALLS_BACKWARD.search(source.get((uf[1], uf[2]), "")):
            continue
        key = (uf[0], uf[1])
        sites[key] = max(sites.get(key, 0), uf[2])
    return sites


def _before_backward(frames: tuple[Frame, ...], sites: dict[tuple[str, str], int]) -> bool:
    """The stack runs the code that calls backward at a line up to its backward call: the
    forward pass and the loss, written as the user's own tensor code (``x @ w``, a loss by
    hand), which py-spy shows at the user's line since it has no torch module frame."""
    for name, path, line in frames:
        last = sites.get((name, path))
        if last is not None and line <= last:
            return True
    return False


def _library_host_work(frames: tuple[Frame, ...], source: Mapping[tuple[str, int], str]) -> bool:
    """Host work no forward pass does (numpy, the standard library, a wait, logging), in a
    library's code or on the user's own line (``np.exp(...)`` in a custom Function); a copy to
    the host (``.item()``) between two backward calls stays where it stands."""
    if not work_kind.is_host(frames, source):
        return False
    return work_kind.of_frames(frames, source) != work_kind.TO_HOST


def _in_a_module(frames: tuple[Frame, ...]) -> bool:
    return any("torch/nn/modules/" in f[1].replace("\\", "/") for f in frames)


def by_position(
    category_of: Callable[[tuple[Frame, ...]], str],
    sites: dict[tuple[str, str], int],
    source: Mapping[tuple[str, int], str] | None = None,
) -> Callable[[tuple[Frame, ...]], str]:
    """``category_of``, with the user's own tensor code that runs before the step's backward
    call (``backward_sites``) as the forward pass: ``profile``'s and attach's ledger's. Host
    work in a library there (numpy, the standard library: ``work_kind.is_host``) stays host
    work."""
    source = source or {}

    def of(frames: tuple[Frame, ...]) -> str:
        cat = category_of(frames)
        if (
            cat == "other"
            and sites
            and _before_backward(frames, sites)
            and not _library_host_work(frames, source)
            and not _in_a_module(frames)  # host work a module's call runs (a hook): _host_inside
        ):
            return "forward"
        return cat

    return of


def profile(
    spans: Iterable[StackSpan],
    source: dict[tuple[str, int], str],
    t0: float,
    t1: float,
    cuda: bool = False,
) -> Profile:
    """Main-thread time by category within a window. Host work of the user's own code that runs
    before the step's backward call (in the function that calls it) is the forward pass and the
    loss, not loop overhead; stalls are judged apart (``window_profile``), whatever their line."""
    spans = tuple(spans)
    category_of = categoriser(source, cuda)  # each distinct stack judged once for both passes
    step_category = by_position(
        category_of, backward_sites(spans, source, cuda, category_of), source
    )
    seconds: dict[str, float] = {}
    lines: dict[str, Counter[Frame]] = {}
    data_parts: dict[str, float] = {}
    parts_seen: dict[int, str] = {}
    for s in spans:
        lo, hi = max(s.t0, t0), min(s.t1, t1)
        if hi <= lo:
            continue
        cat = step_category(s.frames)
        seconds[cat] = seconds.get(cat, 0.0) + (hi - lo)
        if cat == "data":
            part = parts_seen.get(id(s.frames))
            if part is None:
                part = parts_seen[id(s.frames)] = data_part(s.frames)
            data_parts[part] = data_parts.get(part, 0.0) + (hi - lo)
        uf = user_frame(s.frames)
        if uf is not None:
            lines.setdefault(cat, Counter())[uf] += int((hi - lo) * 1e6)
    return Profile(seconds, lines, data_parts)


def overlaps(
    spans: Sequence[StackSpan], windows: Iterable[tuple[float, float]]
) -> Iterator[tuple[StackSpan, float]]:
    """(span, seconds inside a window) for every span meeting a window. Spans are in time
    order and short, so each window costs a binary search plus the spans it covers."""
    starts = [s.t0 for s in spans]
    longest = max((s.t1 - s.t0 for s in spans), default=0.0)
    for t0, t1 in sorted(windows):
        i = bisect.bisect_left(starts, t0 - longest)
        while i < len(spans) and spans[i].t0 < t1:
            s = spans[i]
            lo, hi = max(s.t0, t0), min(s.t1, t1)
            if hi > lo:
                yield s, hi - lo
            i += 1


def dominant_user_frame(
    spans: Sequence[StackSpan], windows: Iterable[tuple[float, float]]
) -> Frame | None:
    """The user's function+line that held the main thread longest inside the windows."""
    counter: Counter[Frame] = Counter()
    for s, seconds in overlaps(spans, windows):
        uf = user_frame(s.frames)
        if uf is not None:
            counter[uf] += int(seconds * 1e6)
    return counter.most_common(1)[0][0] if counter else None


def caller_of(
    spans: Sequence[StackSpan], window: tuple[float, float], path_part: str
) -> Frame | None:
    """The user's line that calls into a library (e.g. ``torch/utils/data/``) most often: the
    last user frame before the first frame whose file contains ``path_part``."""
    return _caller(spans, [window], lambda f: path_part in f[1].replace("\\", "/"))


def backward_caller(spans: Sequence[StackSpan], window: tuple[float, float]) -> Frame | None:
    """The user's line that runs autograd's backward most often (``loss.backward()``)."""
    return _caller(spans, [window], lambda f: _runs_backward(f[0], f[1]))


def is_save(frame: Frame) -> bool:
    """A checkpoint writer's frame: torch.serialization, safetensors' save_file, Lightning's."""
    path = frame[1].replace("\\", "/")
    if "torch/serialization.py" in path:
        return True
    return short_name(frame[0]) in _SAVE_FUNCS.get("/".join(path.rsplit("/", 2)[-2:]), ())


def save_caller(spans: Sequence[StackSpan], windows: Iterable[tuple[float, float]]) -> Frame | None:
    """The user's line that calls a checkpoint writer (``torch.save``) longest in the windows:
    read from the stacks inside the writer, not from whatever the windows' edges overlap."""
    return _caller(spans, windows, is_save)


def _caller(
    spans: Sequence[StackSpan],
    windows: Iterable[tuple[float, float]],
    entry: Callable[[Frame], bool],
) -> Frame | None:
    """The last user frame before the first ``entry`` frame, weighted by time, most often."""
    counter: Counter[Frame] = Counter()
    for s, seconds in overlaps(spans, windows):
        if any("importlib._bootstrap" in f[1] for f in s.frames):
            continue  # importing the library (`import torch` at line 2) calls nothing of it
        for i, frame in enumerate(s.frames):
            if entry(frame):
                callers = [f for f in s.frames[:i] if is_user_file(f[1])]
                if callers:
                    counter[callers[-1]] += int(seconds * 1e6)
                break
    return counter.most_common(1)[0][0] if counter else None


def window_profile(
    spans: Sequence[StackSpan],
    source: dict[tuple[str, int], str],
    windows: Iterable[tuple[float, float]],
    cuda: bool = False,
) -> Profile:
    """Main-thread time by category inside several windows (the stalls, say)."""
    seconds: dict[str, float] = {}
    lines: dict[str, Counter[Frame]] = {}
    category_of = categoriser(source, cuda)
    for s, sec in overlaps(spans, windows):
        cat = category_of(s.frames)
        seconds[cat] = seconds.get(cat, 0.0) + sec
        uf = user_frame(s.frames)
        if uf is not None:
            lines.setdefault(cat, Counter())[uf] += int(sec * 1e6)
    return Profile(seconds, lines)


# What only the training loop (or its train-step helper) calls: the model's own forward is
# an ancestor of forward passes, and evaluation calls it too.
_DRIVES_TRAINING = ("backward", "optimizer")


def loop_functions(
    spans: Iterable[StackSpan], source: dict[tuple[str, int], str]
) -> frozenset[tuple[str, str]]:
    """(function, file) of every user frame that is an ancestor of a backward pass or an
    optimizer step in these spans: the training loop and its train-step helpers."""
    out: set[tuple[str, str]] = set()
    seen: set[tuple[Frame, ...]] = set()
    for s in spans:
        if s.frames in seen:
            continue
        seen.add(s.frames)
        if category(s.frames, source) in _DRIVES_TRAINING:
            out.update((f[0], f[1]) for f in s.frames if is_user_file(f[1]))
    return frozenset(out)


def recorded_caller(infos: Iterable[dict[str, Any]], key: str) -> Frame | None:
    """The user's line behind a stack the probe recorded once under ``key`` (innermost first):
    ``loader_callers``, the line that asked the DataLoader for a batch; ``anomaly_callers``,
    the line that turned anomaly detection on; ``profiler_callers``, the line that started a
    profiler. The innermost frame in the user's own code."""
    for info in infos:
        callers = info.get(key)
        if not isinstance(callers, list):
            continue
        for f in callers:
            if (
                isinstance(f, list)
                and len(f) == 3
                and isinstance(f[0], str)
                and isinstance(f[1], str)
                and isinstance(f[2], int)
                and is_user_file(f[1])
            ):
                return (f[0], f[1], f[2])
        return None
    return None


def step_callers(infos: Iterable[dict[str, Any]]) -> frozenset[tuple[str, str]]:
    """(function, file) of the user frames on the stack that stepped the optimizer first, as
    the probe read it: the loop functions even where sampling caught none of its steps."""
    for info in infos:
        callers = info.get("step_callers")
        if isinstance(callers, list):
            return frozenset((f[0], f[1]) for f in callers if is_user_file(f[1]))
    return frozenset()
