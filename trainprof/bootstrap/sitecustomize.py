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
    except Exception:
        pass
    finally:
        if added:
            try:
                sys.path.remove(parent)  # type: ignore[arg-type]
            except ValueError:
                pass


def _forget_bootstrap_dir() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]


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
