"""Which processes `trainprof attach PID` samples: the PID itself when it is the training
process; its parent when it is a DataLoader worker; the Python training processes under it
when it is a launcher. A Python launcher says so itself (torchrun,
``python -m torch.distributed.run``, ``accelerate launch``, a script waiting in
``torch.multiprocessing.spawn``); any other process (a shell script, a container's init, PID 1)
is taken as one only when the user says so (``--launcher``): under PID 1 runs every job of
the machine. Under a launcher, zombies and other users' processes are left out, and the note
says what was taken and why. A PID that is gone, or that is not Python and runs no Python, is
one line and exit 2."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

import psutil

from trainprof.errors import TrainprofError

Dump = Callable[[int], str]  # a py-spy dump of a process's threads (text)

# A Python process whose command line names one of these starts others that train: a launcher.
LAUNCHERS = ("torchrun", "torch.distributed.run", "torch.distributed.launch", "accelerate")
# Command-line words of a multiprocessing child (a DataLoader worker started by spawn/forkserver).
_MP_CHILD = ("multiprocessing.spawn", "multiprocessing.forkserver", "--multiprocessing-fork")


@dataclass(frozen=True)
class Process:
    pid: int
    command: tuple[str, ...]
    cwd: str | None
    rank: int | None  # torchrun's RANK, when the environment can be read
    started: float | None = None  # its start time: with the pid, which process it is

    def is_running(self) -> bool:
        """The same process still runs (not exited, not a zombie, and its pid not reused)."""
        try:
            p = psutil.Process(self.pid)
            if self.started is not None and abs(p.create_time() - self.started) > 0.01:
                return False  # the pid went to another process
            return p.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False


@dataclass(frozen=True)
class Targets:
    """What to sample, and what the user should be told about the PID they gave."""

    given: int
    processes: tuple[Process, ...]  # the training processes, rank order (rank 0 first)
    note: str | None  # e.g. "pid 123 is a DataLoader worker of pid 100: attaching to 100"


def _cmdline(p: psutil.Process) -> list[str]:
    """The command line as the process was given it: read as bytes (psutil reads it as text,
    which turns a CR LF inside an argument into LF)."""
    try:
        with open(f"/proc/{p.pid}/cmdline", "rb") as f:
            raw = f.read()
        if raw.endswith(b"\0"):  # NUL-separated (a rewritten title may not be: psutil's way)
            return [os.fsdecode(a) for a in raw[:-1].split(b"\0")]
    except OSError:
        pass
    try:
        return p.cmdline()
    except psutil.Error:
        return []


def is_python(p: psutil.Process) -> bool:
    """A CPython interpreter: its executable's or its first argument's name starts with python."""
    names = []
    try:
        names.append(os.path.basename(p.exe()))
    except psutil.Error:
        pass
    cmd = _cmdline(p)
    if cmd:
        names.append(os.path.basename(cmd[0]))
    try:
        names.append(p.name())
    except psutil.Error:
        pass
    return any(n.startswith("python") for n in names if n)


def is_launcher(p: psutil.Process) -> bool:
    cmd = " ".join(_cmdline(p))
    return any(word in cmd for word in LAUNCHERS)


def is_worker(p: psutil.Process) -> bool:
    """A DataLoader worker: a Python child of a Python process that is either a fork of it
    (the same command line) or a multiprocessing child."""
    try:
        parent = p.parent()
    except psutil.Error:
        return False
    if parent is None or not is_python(p) or not is_python(parent):
        return False
    cmd = _cmdline(p)
    if any(word in " ".join(cmd) for word in _MP_CHILD):
        return True
    return bool(cmd) and cmd == _cmdline(parent)


def _describe(p: psutil.Process) -> Process:
    cwd: str | None
    try:
        cwd = p.cwd()
    except psutil.Error:
        cwd = None
    rank: int | None = None
    try:
        value = p.environ().get("RANK")
        rank = int(value) if value is not None and value.isdigit() else None
    except (psutil.Error, OSError):
        pass
    started: float | None
    try:
        started = p.create_time()
    except psutil.Error:
        started = None
    return Process(p.pid, tuple(_cmdline(p)), cwd, rank, started)


def has_torch(pid: int) -> bool | None:
    """Whether the process has torch's library loaded (None: its memory map is unreadable)."""
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as f:
            return any("libtorch" in line for line in f)
    except OSError:
        return None


def spawns_trainers(p: psutil.Process, dump: Dump | None) -> bool:
    """A Python process that waits in ``torch.multiprocessing.spawn`` (the DDP tutorial's way
    of starting ranks): its multiprocessing children train, though their command lines look
    like DataLoader workers'. Told by one py-spy dump of it, and only where it has such a
    child that loaded torch (a training process with spawn-started workers is not dumped for
    nothing more than that)."""
    if dump is None:
        return False
    try:
        children = p.children()
    except psutil.Error:
        return False
    if not any(is_worker(c) and has_torch(c.pid) for c in children):
        return False
    return "torch/multiprocessing/spawn.py" in dump(p.pid).replace("\\", "/")


@dataclass
class _Under:
    """The Python training processes found under a launcher, and what was left out."""

    trainers: list[psutil.Process]
    torch_only: bool = False  # some loaded torch: the others were left out
    zombies: list[int] = field(default_factory=list)
    other_users: list[int] = field(default_factory=list)

    def left_out(self) -> str:
        parts = []
        if self.zombies:
            parts.append(f"{_pids(self.zombies)} exited (zombies)")
        if self.other_users:
            parts.append(f"{_pids(self.other_users)} of other users")
        return f"; left out: {', '.join(parts)}" if parts else ""


def _pids(pids: list[int], most: int = 8) -> str:
    more = f" and {len(pids) - most} more" if len(pids) > most else ""
    return ("pid " if len(pids) == 1 else "pids ") + ", ".join(map(str, pids[:most])) + more


def _uid(p: psutil.Process) -> int | None:
    try:
        return int(p.uids().real)
    except psutil.Error:
        return None


def _trainers_under(p: psutil.Process, spawned: bool = False) -> _Under:
    """The Python processes under a launcher that are neither launchers nor workers (nor this
    trainprof), nor zombies, nor another user's; those that loaded torch, when any did.
    ``spawned``: the launcher started them with ``torch.multiprocessing.spawn``, so its own
    multiprocessing children count."""
    under = _Under([])
    try:
        children = p.children(recursive=True)
    except psutil.Error:
        return under
    ours = {os.getpid(), *(a.pid for a in psutil.Process().parents())}
    direct = {c.pid for c in p.children()} if spawned else set()
    owner = _uid(p)
    found = []
    for c in children:
        if c.pid in ours or not is_python(c):
            continue
        try:
            zombie = c.status() == psutil.STATUS_ZOMBIE
        except psutil.Error:
            continue  # gone meanwhile
        if zombie:
            under.zombies.append(c.pid)
        elif owner is not None and _uid(c) != owner:
            under.other_users.append(c.pid)
        elif not is_launcher(c) and (c.pid in direct or not is_worker(c)):
            found.append(c)
    torch = [c for c in found if has_torch(c.pid) is not False]
    under.trainers = torch or found
    under.torch_only = bool(torch) and len(torch) < len(found)
    return under


def resolve(pid: int, dump: Dump | None = None, launcher: bool = False) -> Targets:
    """The processes to sample for ``pid``; ``launcher``: the user said it is one (``--launcher``),
    so a process that is not Python leads to the Python training processes under it."""
    if pid <= 0:
        raise TrainprofError(f"{pid} is not a process id")
    if pid in (os.getpid(), os.getppid()):
        who = "this trainprof process" if pid == os.getpid() else "the parent of this trainprof"
        raise TrainprofError(
            f"pid {pid} is {who}: give the PID of the training process (see `ps -ef --forest`)"
        )
    try:
        p = psutil.Process(pid)
        name = p.name()
        status = p.status()
    except psutil.NoSuchProcess:
        raise TrainprofError(f"no process with pid {pid} (it is not running)") from None
    except psutil.AccessDenied:
        raise TrainprofError(f"pid {pid}: its details cannot be read (access denied)") from None
    if status == psutil.STATUS_ZOMBIE:
        raise TrainprofError(f"pid {pid} ({name}) has exited (a zombie waiting for its parent)")
    if is_worker(p):
        parent = p.parent()
        assert parent is not None
        note = f"pid {pid} is a DataLoader worker of pid {parent.pid}: attaching to {parent.pid}"
        return Targets(pid, (_describe(parent),), note)
    # a Python process that is no launcher trains itself, unless it waits in mp.spawn
    python = is_python(p)
    spawner = python and not is_launcher(p)
    if spawner and not spawns_trainers(p, dump):
        return Targets(pid, (_describe(p),), None)
    under = _trainers_under(p, spawned=spawner)
    if not under.trainers:
        what = "a launcher" if python else "not a Python process"
        raise TrainprofError(
            f"pid {pid} ({name}) is {what} and runs no Python training process under it"
            f"{under.left_out()}; give the PID of the Python process that trains "
            "(see `ps -ef --forest`)"
        )
    procs = sorted(
        (_describe(c) for c in under.trainers), key=lambda t: (t.rank is None, t.rank, t.pid)
    )
    if not python and not launcher:
        raise TrainprofError(
            f"pid {pid} ({name}) is not a Python process; under it run Python processes "
            f"({_pids([t.pid for t in procs])}), which may not all be one job's: give the PID "
            "of the one that trains (see `ps -ef --forest`), or, if pid "
            f"{pid} launched them for the job, `trainprof attach --launcher {pid}`"
        )
    ranks = ", ".join(
        f"{t.pid}" + (f" (rank {t.rank})" if t.rank is not None else "") for t in procs
    )
    if not python:
        why = "named one by --launcher"
    elif spawner:
        why = "it waits in torch.multiprocessing.spawn"
    else:
        cmd = " ".join(_cmdline(p))
        why = f"its command line names {next((w for w in LAUNCHERS if w in cmd), 'a launcher')}"
    which = "that loaded torch" if under.torch_only else ""
    note = (
        f"pid {pid} ({name}) is a launcher: attaching to the Python training processes under "
        f"it{which and ' ' + which}: {ranks} ({why}){under.left_out()}"
    )
    return Targets(pid, tuple(procs), note)
