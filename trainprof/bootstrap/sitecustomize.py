"""trainprof bootstrap: put first on PYTHONPATH by `trainprof run`, imported by every Python
process of the job (main, DataLoader workers started with spawn, torchrun ranks).

It starts the probe only when the run directory variable is set, takes its own folder back
off ``sys.path`` (so the job sees the path it would have seen), and then runs the user's own
``sitecustomize`` if one exists further along the path. Any failure here is swallowed: the
probe must never break the job.
"""

import os
import sys


def _start_probe() -> None:
    if not os.environ.get("TRAINPROF_RUN_DIR"):
        return
    parent = os.environ.get("TRAINPROF_PKG_PARENT")
    added = bool(parent) and parent not in sys.path
    if added:
        sys.path.append(parent)  # type: ignore[arg-type]
    try:
        from trainprof.probe import start

        start()
    except Exception as exc:
        _note_failure(exc)
    finally:
        if added:
            try:
                sys.path.remove(parent)  # type: ignore[arg-type]
            except ValueError:
                pass


def _note_failure(exc: Exception) -> None:
    """Leave the runner the first failure (a stale ``trainprof`` earlier on the job's path, a
    Python the probe cannot run on), so the report names it instead of guessing. The name is
    ``trainprof.store.schema.PROBE_FAILED``: nothing of trainprof can be imported here."""
    try:
        path = os.path.join(os.environ["TRAINPROF_RUN_DIR"], "probe-failed")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(path, flags, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(f"{type(exc).__name__}: {exc} (Python {sys.version.split()[0]})"[:500])
    except Exception:
        pass


def _forget_bootstrap_dir() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if not _is_dir(p, here)]


def _is_dir(entry: str, here: str) -> bool:
    """Whether a sys.path entry names ``here``; a relative one cannot in a deleted working dir."""
    try:
        return os.path.abspath(entry or ".") == here
    except OSError:
        return False


def _chain_user_sitecustomize() -> None:
    """Import the user's sitecustomize, if any. Without one, ours must stay in sys.modules:
    the interpreter's own ``import sitecustomize`` looks it up there when we return."""
    me = sys.modules.pop("sitecustomize", None)
    try:
        import sitecustomize  # noqa: F401  (the user's, now that our folder is off the path)
    except ImportError as exc:
        if exc.name != "sitecustomize":
            raise
        if me is not None:
            sys.modules["sitecustomize"] = me


try:
    _start_probe()
except Exception:
    pass
_forget_bootstrap_dir()
_chain_user_sitecustomize()
