"""The run directory: created private (0700), never through a pre-existing symlink."""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from trainprof.errors import TrainprofError
from trainprof.store.redact import redact_data, redact_text

RUNS_DIR = "trainprof-runs"
META = "run.json"
SAMPLES = "samples.jsonl"
REPORT = "report.json"
LIVE = "live.json"  # the findings so far, judged while the job runs (collect/live_judge.py)
STDOUT_LOG = "stdout.log"
STDERR_LOG = "stderr.log"


def default_run_dir(command: list[str], base: Path | None = None) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    label = _label(command)
    if base is None:
        try:
            base = Path.cwd() / RUNS_DIR
        except OSError as exc:  # the current directory was deleted under us
            raise TrainprofError(
                f"cannot create run directory in the current directory: {exc.strerror}; "
                "give --run-dir"
            ) from None
    return base / f"{stamp}-{label}"


def current_dir() -> str | None:
    """The working directory, or None where it was deleted (``os.getcwd`` raises there)."""
    try:
        return os.getcwd()
    except OSError:
        return None


def check_readable(path: Path, what: str, verb: str = "read") -> None:
    """One line and exit 2 where ``path`` cannot be looked at (a directory on its way denies
    search: Path.exists() and is_dir() raise there); a missing path is left to the caller."""
    try:
        os.stat(path)
    except PermissionError as exc:
        raise TrainprofError(f"cannot {verb} {what} {path}: {exc.strerror}") from None
    except (OSError, ValueError):
        pass


def _label(command: list[str]) -> str:
    """A short name for the job: the script's stem, the module after -m, or the program."""
    words = [w for w in command[1:] if not w.startswith("-")] if len(command) > 1 else []
    if "-m" in command:
        i = command.index("-m")
        if i + 1 < len(command):
            return _slug(command[i + 1])
    for w in words:
        if w.endswith(".py"):
            return _slug(Path(w).stem)
    return _slug(Path(command[0]).name if command else "job")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:40] or "job"


def create(path: Path, explicit: bool) -> Path:
    """Make the run directory. A default name that is taken gets a numeric suffix; an explicit
    ``--run-dir`` must be new or an empty real directory. One that cannot be made (a read-only
    or foreign parent, a regular file in the way) is one line and exit 2, before the job starts.
    """
    try:
        path = path.absolute()
        return _create(path, explicit)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if exc.filename and os.fspath(exc.filename) != os.fspath(path):
            reason += f" ({exc.filename})"
        raise TrainprofError(f"cannot create run directory {path}: {reason}") from None


def _create(path: Path, explicit: bool) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if explicit:
        if path.is_symlink():
            raise TrainprofError(f"--run-dir {path} is a symlink; give a real directory")
        if path.exists():
            if not path.is_dir() or any(path.iterdir()):
                raise TrainprofError(f"--run-dir {path} exists and is not an empty directory")
            os.chmod(path, 0o700)
            return path
        os.mkdir(path, 0o700)
        return path
    for i in range(1000):
        candidate = path if i == 0 else path.with_name(f"{path.name}-{i}")
        try:
            os.mkdir(candidate, 0o700)  # mkdir never follows a symlink at the final component
            return candidate
        except FileExistsError:
            continue
    raise TrainprofError(f"could not create a run directory next to {path}")


def latest_run_dir(base: Path) -> Path | None:
    """The most recently started run under ``base``: by the UTC stamp its name starts with,
    then by when its run.json was last written (a default name taken twice in one second)."""
    try:
        entries = list(os.scandir(base))
    except OSError:
        return None
    best: tuple[str, float] | None = None
    found: Path | None = None
    for e in entries:
        try:
            if not e.is_dir() or e.is_symlink():
                continue
            mtime = os.stat(os.path.join(e.path, META)).st_mtime
        except OSError:
            continue  # not a run directory (no run.json)
        stamp = e.name[:15] if _STAMP.match(e.name) else ""
        if best is None or (stamp, mtime) > best:
            best, found = (stamp, mtime), Path(e.path)
    return found


_STAMP = re.compile(r"^\d{8}-\d{6}")


def write_json(path: Path, data: Any) -> None:
    """Write a file inside the run directory without following a symlink planted there: into a
    new file beside it, renamed over it, so a write that fails (a full disk) leaves the old
    file whole. Known secrets are masked; undecodable bytes stay ``\\udcXX`` escapes (ASCII)."""
    text = json.dumps(redact_data(data), indent=1, default=str) + "\n"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(tmp, flags, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


RESERVE = ".reserve"
RESERVE_BYTES = 256 * 1024


def reserve_space(run_dir: Path, nbytes: int = RESERVE_BYTES) -> bool:
    """Hold some disk space for the end of the run: should the disk fill up while the job runs,
    ``release_space`` lets run.json and report.json still be written."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(run_dir / RESERVE, flags, 0o600)
    except OSError:
        return False
    try:
        try:
            os.posix_fallocate(fd, 0, nbytes)
        except OSError:  # not supported here: real bytes hold the blocks as well
            view = memoryview(bytes(nbytes))
            while view:
                view = view[os.write(fd, view) :]
        return True
    except OSError:
        release_space(run_dir)
        return False
    finally:
        os.close(fd)


def release_space(run_dir: Path) -> bool:
    """Give back what ``reserve_space`` held; False when nothing was held."""
    try:
        os.unlink(run_dir / RESERVE)
        return True
    except OSError:
        return False


def write_private_text(path: Path, text: str) -> None:
    """Write a text file inside the run directory: 0600, never through a planted symlink."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8", errors=TEXT_ERRORS) as f:
        f.write(redact_text(text))


def write_user_file(path: Path, text: str) -> None:
    """Write a file the user named (``--json PATH``): parents made as needed (0700), the file
    created 0600 (an existing file keeps its mode). ``-`` is standard output. Known secrets are
    masked; a lone surrogate (an undecodable byte) the writer left is written as ``\\udcXX``.
    A FIFO or a socket is refused (it could block for ever); /dev/null and a terminal are not.
    """
    text = redact_text(text)
    if str(path) == "-":
        write_stdout(text)
        return
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    _refuse_special(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK
    fd = os.open(path, flags, 0o600)
    os.set_blocking(fd, True)
    with os.fdopen(fd, "w", encoding="utf-8", errors=TEXT_ERRORS) as f:
        f.write(text)


TEXT_ERRORS = "backslashreplace"  # what a text file does with a character UTF-8 cannot hold


def write_stdout(text: str) -> None:
    """Text to standard output, whatever its encoding cannot hold written as an escape."""
    sys.stdout.flush()
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:
        sys.stdout.write(text)
    else:
        encoding = sys.stdout.encoding or "utf-8"
        buffer.write(text.encode(encoding, TEXT_ERRORS))
        buffer.flush()
    sys.stdout.flush()


def _refuse_special(path: Path) -> None:
    try:
        st = os.stat(path)
    except OSError:
        return
    if not _writable_kind(st.st_mode):
        raise OSError(errno.EINVAL, "not a regular file (a pipe or a socket)", str(path))


def _writable_kind(mode: int) -> bool:
    """A regular file, or a character device (/dev/null, a terminal): never a FIFO or socket."""
    return stat.S_ISREG(mode) or stat.S_ISCHR(mode)


def check_user_file(path: Path, option: str = "--json") -> None:
    """Before a job starts: can ``path`` be written? (Its missing parents would be made.)
    One line and exit 2 when not, so a long run never ends without its report file."""
    if str(path) == "-":
        return
    path = path.absolute()
    try:
        _check_writable(path, option)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if exc.filename and os.fspath(exc.filename) != os.fspath(path):
            reason += f" ({exc.filename})"
        raise TrainprofError(f"cannot write {option} {path}: {reason}") from None


def _check_writable(path: Path, option: str) -> None:
    try:
        st: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        st = None
    except NotADirectoryError as exc:  # a parent is a regular file
        raise OSError(exc.errno, exc.strerror, _first_non_dir(path)) from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise TrainprofError(f"{option} {path} is a directory; give a file path")
        if not _writable_kind(st.st_mode):
            raise TrainprofError(
                f"{option} {path} is not a regular file (a pipe or a socket, which could block "
                "for ever); give a file path, or - where standard output is allowed"
            )
        with open(path, "a", encoding="utf-8"):
            pass  # opened for writing, not truncated: the old content stays until the end
        return
    parent = path.parent
    while not os.path.lexists(parent) and parent != parent.parent:
        parent = parent.parent  # the nearest existing ancestor: where mkdir would start
    if not parent.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(parent))
    try:
        fd, probe = tempfile.mkstemp(prefix=".trainprof-", dir=parent)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(parent)) from None
    os.close(fd)
    os.unlink(probe)


def _first_non_dir(path: Path) -> str:
    """The first ancestor of ``path`` that exists and is not a directory."""
    for parent in reversed(path.parents):
        if os.path.lexists(parent) and not parent.is_dir():
            return str(parent)
    return str(path)


def read_json(path: Path) -> Any:
    """A run file's JSON value; ValueError for one that is not JSON or is nested too deeply,
    OSError for one that is not a regular file (``run_files``)."""
    from trainprof.store.run_files import open_regular

    with open_regular(path) as f:
        return loads(f.read().decode("utf-8"))


MAX_DEPTH = 200  # far beyond any file trainprof writes; deeper is a damaged or hostile file


def loads(text: str) -> Any:
    """``json.loads``, with a value nested deeper than ``MAX_DEPTH`` a ValueError (JSON's
    decoder would raise RecursionError, and every reader of the value would recurse too)."""
    if _too_deep(text):
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels") from None


_BRACKETS = re.compile(r'[\[\]{}]|"(?:[^"\\]+|\\.)*"')


def _too_deep(text: str) -> bool:
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False
    depth = 0
    for m in _BRACKETS.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif c in "]}":
            depth -= 1
    return False


def open_private(path: Path, mode: str = "w") -> Any:
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    flags |= os.O_APPEND if "a" in mode else os.O_TRUNC
    fd = os.open(path, flags, 0o600)
    return os.fdopen(fd, mode.replace("b", "") + "b", buffering=0)
